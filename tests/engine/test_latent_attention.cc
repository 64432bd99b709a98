// Multi-head latent attention's cache (DeepSeek-V2, ../shared/models/arch/tiny-deepseek2.gguf):
// per token and layer it holds one row of kv_lora_rank + rope values and nothing else (no V
// buffer, no per-head K or V), and every figure the server reports says so, beside what the
// same model would need with each head's K and V cached; a long sequence decoded one token a
// step over that cache matches the independent implementation that expands every head's K and
// V from the latent; f16 caches stay close; q8_0, whose 32-value groups a 40-value row does not
// fill, is refused naming the field.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "gguf/gguf.h"
#include "logprob_reference.h"
#include "model/decoder_model.h"
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

}  // namespace
}  // namespace kvserve
