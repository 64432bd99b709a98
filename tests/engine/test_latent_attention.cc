// Multi-head latent attention's cache (DeepSeek-V2, ../shared/models/arch/tiny-deepseek2.gguf):
// per token and layer it holds one row of kv_lora_rank + rope values and nothing else (no V
// buffer, no per-head K or V), and every figure the server reports says so, beside what the
// same model would need with each head's K and V cached; a long sequence decoded one token a
// step over that cache matches the independent implementation that expands every head's K and
// V from the latent; f16 caches stay close; q8_0, whose 32-value groups a 40-value row does not
// fill, is refused naming the field. A synthetic DeepSeek-V2 of other widths (kvserve-mkmodel's)
// agrees with the same reference, and there a q8_0 latent cache stays close to f32 and batched
// equals solo.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gguf/gguf.h"
#include "engine_harness.h"
#include "logprob_reference.h"
#include "model/decoder_model.h"
#include "model/synthetic.h"
#include "model_runner.h"
#include "reference_decoder.h"
#include "runtime/engine.h"
#include "test_support.h"

namespace kvserve {
namespace {

const char* const kModel = "arch/tiny-deepseek2.gguf";

// The file's own widths, read from its keys (not from the engine's hyperparameters).
struct FileShape {
  int64_t layers, heads, lora, rope, nope, v;
};
FileShape file_shape(const GgufFile& f) {
  auto i = [&](const std::string& k) { return f.get("deepseek2." + k).as_int(k); };
  const int64_t rope = i("rope.dimension_count");
  return {i("block_count"), i("attention.head_count"), i("attention.kv_lora_rank"), rope,
          i("attention.key_length_mla") - rope, i("attention.value_length_mla")};
}

EngineOptions options(const std::string& dtype) {
  EngineOptions o;
  o.model.path = testing::shared_model(kModel);
  o.cache.block_size = 16;
  o.cache.num_blocks = 64;
  o.cache.dtype = dtype;
  o.scheduler.max_model_len = 1024;
  return o;
}

TEST(LatentCache, HoldsOneRowOfLatentAndRotaryKeyPerTokenAndLayer) {
  KVSERVE_REQUIRE_SHARED_FILE(testing::shared_model(kModel));
  GgufFile f(testing::shared_model(kModel));
  const FileShape s = file_shape(f);
  const int64_t latent_values = s.layers * (s.lora + s.rope);              // 5 x (32 + 8)
  const int64_t per_head_values = s.layers * s.heads * (s.nope + s.rope + s.v);  // 5 x 8 x (16 + 8 + 12)
  for (const auto& [dtype, bytes] : {std::pair<std::string, int64_t>{"f32", 4}, {"f16", 2}}) {
    Engine engine(options(dtype));
    const ModelInfo& m = engine.model_info();
    EXPECT_EQ(m.kv_bytes_per_token, latent_values * bytes) << dtype;  // 800 in F32, as llama.cpp's log says
    EXPECT_EQ(m.kv_bytes_per_token_multi_head, per_head_values * bytes) << dtype;  // 5760 in F32
    EXPECT_EQ(m.kv_total_bytes, int64_t{m.num_blocks} * m.block_size * latent_values * bytes) << dtype;
    EXPECT_EQ(m.mla.kv_lora_rank, s.lora);
    EXPECT_EQ(m.mla.qk_rope_dim, s.rope);
    EXPECT_EQ(m.n_head_kv, 1);
    EXPECT_EQ(m.head_dim, s.lora + s.rope);
    // The what-if table: the model as it is is its latent row; MHA is each head's K and V.
    for (const KvVariant& v : m.kv_what_if) {
      if (v.name == "as is" || v.name == "MLA") {
        EXPECT_EQ(v.bytes_per_token, latent_values * bytes) << v.name;
      }
      if (v.name == "MHA") {
        EXPECT_EQ(v.bytes_per_token, per_head_values * bytes);
      }
    }
    engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));
  }
  // The storage itself: K rows of lora + rope values, no V buffers at all.
  DecoderModel model(f);
  const KvShape shape = model.kv_shape();
  KvStorage kv(shape, 16, 8);
  EXPECT_EQ(kv.total_bytes(), 16 * 8 * latent_values * 4);
  for (int l = 0; l < s.layers; ++l) EXPECT_EQ(kv.v<float>(l), nullptr);
}

// 700 tokens: a 300-token prompt, then 400 decode steps, each over every cached row. The
// reference recomputes every head's K and V from the latent in double precision.
TEST(LatentCache, LongDecodeOverTheLatentsMatchesTheExpandedReference) {
  KVSERVE_REQUIRE_SHARED_FILE(testing::shared_model(kModel));
  GgufFile f(testing::shared_model(kModel));
  const testing::ReferenceDecoder ref(f);
  std::mt19937 rng(5);
  std::vector<int32_t> tokens = {1};
  for (int i = 0; i < 699; ++i) tokens.push_back(3 + static_cast<int32_t>(rng() % 509));
  const std::vector<double> want = ref.logprobs(tokens);
  auto model = load_model(f, {});
  for (const int32_t bytes : {4, 2}) {
    const std::vector<double> got = teacher_forced(*model, tokens, 300, bytes);
    ASSERT_EQ(got.size(), want.size());
    double sum = 0, late = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      sum += std::fabs(got[i] - want[i]);
      if (i >= 600) late += std::fabs(got[i] - want[i]);
    }
    std::printf("%d-byte latent cache, 700 tokens: mean |ours - expanded reference| %.6f, last 100 %.6f\n", bytes,
                sum / got.size(), late / 99);
    EXPECT_LE(sum / got.size(), bytes == 4 ? 0.002 : 0.01);
    EXPECT_LE(late / 99, bytes == 4 ? 0.002 : 0.01);
  }
}

TEST(LatentCache, Q8WithRowsOfPartialGroupsIsRefusedNamingTheField) {
  KVSERVE_REQUIRE_SHARED_FILE(testing::shared_model(kModel));
  try {
    Engine engine(options("q8_0"));
    ADD_FAILURE() << "q8_0 accepted for 40-value rows";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("cache.dtype"), std::string::npos) << e.what();
  }
}

// Widths unlike the shared model's: a 56-value latent and 8 rotary dims (a 64-value row, which
// q8_0 takes), 24 no-rotary dims, 20-wide values, 4 heads, one dense layer, then mixtures of 8
// experts (2 used) with one shared expert.
std::string synthetic_latent_model() {
  SyntheticSpec s;
  s.arch = "deepseek2";
  s.dim = 128;
  s.layers = 3;
  s.heads = 4;
  s.ffn = 256;
  s.kv_lora = 56;
  s.qk_rope = 8;
  s.qk_nope = 24;
  s.v_head = 20;
  s.experts = 8;
  s.experts_used = 2;
  s.expert_ffn = 48;
  const std::string path = std::string(KVSERVE_BINARY_DIR) + "/test-latent-synthetic.gguf";
  write_synthetic_model(s, path);
  return path;
}

TEST(SyntheticLatent, OtherWidthsMatchTheReferenceAndAQ8CacheStaysClose) {
  GgufFile f(synthetic_latent_model());
  const testing::ReferenceDecoder ref(f);
  std::mt19937 rng(9);
  std::vector<int32_t> tokens = {1};
  for (int i = 0; i < 150; ++i) tokens.push_back(3 + static_cast<int32_t>(rng() % 509));
  const std::vector<double> want = ref.logprobs(tokens);
  auto model = load_model(f, {});
  EXPECT_EQ(model->kv_shape().head_dim * model->kv_shape().n_kv_heads, 64);
  double mean[3] = {};
  for (const int32_t bytes : {4, 2, 1}) {
    const std::vector<double> got = teacher_forced(*model, tokens, 60, bytes);
    ASSERT_EQ(got.size(), want.size());
    double& sum = mean[bytes == 4 ? 0 : bytes == 2 ? 1 : 2];
    for (size_t i = 0; i < got.size(); ++i) sum += std::fabs(got[i] - want[i]) / got.size();
    std::printf("synthetic deepseek2, %d-byte latent cache: mean |ours - expanded reference| %.6f\n", bytes, sum);
  }
  // Random weights attend almost evenly, so scores matter less than in a trained model: the
  // bounds are tight (a query scale 5% off moves f32 by 0.0024; measured 5e-7, 2e-5, 7e-4).
  EXPECT_LE(mean[0], 1e-4);
  EXPECT_LE(mean[1], 1e-3);
  EXPECT_LE(mean[2], 0.01);
  EXPECT_GT(mean[2], mean[0]) << "the q8_0 cache rounded nothing?";
}

// Twelve greedy requests at once in a q8_0 latent cache (prefix caching on, a shared prefix)
// give each one its solo output through the same cache type.
TEST(SyntheticLatent, Q8CacheBatchedEqualsSolo) {
  const std::string path = synthetic_latent_model();
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> solo;
  {
    GgufFile f(path);
    DecoderModel model(f);
    testing::ModelRunner runner(model, 16, 256, 0, /*element_bytes=*/1);
    std::mt19937 rng(3);
    std::vector<int32_t> prefix = {1};
    for (int k = 0; k < 20; ++k) prefix.push_back(3 + static_cast<int32_t>(rng() % 509));
    for (int i = 0; i < 12; ++i) {
      std::vector<int32_t> prompt = i % 2 ? prefix : std::vector<int32_t>{1};
      for (int k = 0, n = 1 + static_cast<int>(rng() % 40); k < n; ++k)
        prompt.push_back(3 + static_cast<int32_t>(rng() % 509));
      const int n = 4 + static_cast<int>(rng() % 30);
      solo.push_back(runner.greedy(prompt, n));
      requests.push_back(testing::greedy_request(prompt, n));
    }
  }
  EngineOptions o;
  o.model.path = path;
  o.cache.block_size = 16;
  o.cache.num_blocks = 256;
  o.cache.dtype = "q8_0";
  o.cache.enable_prefix_caching = true;
  o.scheduler.max_model_len = 512;
  Engine engine(o);
  EXPECT_EQ(engine.model_info().kv_bytes_per_token, 3 * 64 * 34 / 32);
  std::vector<std::shared_ptr<QueueSink>> sinks;
  for (const Request& r : requests) {
    sinks.push_back(std::make_shared<QueueSink>());
    ASSERT_TRUE(engine.submit(r, sinks.back()).ok());
  }
  for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(testing::collect(*sinks[i]).tokens, solo[i]) << "request " << i;
  engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));
}

}  // namespace
}  // namespace kvserve
