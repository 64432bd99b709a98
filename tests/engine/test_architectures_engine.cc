// Every architecture of ../shared/models/arch through the engine: continuous batching (with
// prefix caching and, in a small cache, preemption) gives each request exactly its solo output;
// under phi3's all-layer sliding window the blocks behind the window are released, so a request
// longer than the whole cache still runs and the capacity figures say so; inspection (attention
// capture and head ablation) works on every architecture.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine_harness.h"
#include "gguf/gguf.h"
#include "kv_cache/kv_layout.h"
#include "model/decoder_model.h"
#include "model_runner.h"
#include "runtime/engine.h"
#include "test_support.h"

namespace kvserve {
namespace {

using testing::collect;
using testing::greedy_request;
using testing::shared_model;

const char* const kArchModels[] = {"tiny-qwen2",      "tiny-phi3",  "tiny-gemma2", "tiny-gpt2",
                                   "tiny-llama3rope", "tiny-qwen3", "tiny-gemma3", "tiny-qwen3moe", "tiny-gpt-oss", "tiny-deepseek2"};

std::string path_of(const char* name) { return shared_model(std::string("arch/") + name + ".gguf"); }

// The cache's layer groups for a model served up to 512 tokens: a block holds one group's layers,
// so a cache of n blocks per group holds what n blocks held with one group.
int32_t groups_of(const std::string& model) {
  GgufFile f(model);
  return KvLayout::plan(DecoderHparams::from_gguf(f).layer_windows, 512).n_groups();
}

EngineOptions options(const std::string& model, int32_t num_blocks) {
  EngineOptions o;
  o.model.path = model;
  o.cache.block_size = 8;
  o.cache.num_blocks = num_blocks;
  o.cache.enable_prefix_caching = true;
  o.scheduler.max_num_seqs = 16;
  o.scheduler.max_num_batched_tokens = 64;
  o.scheduler.max_model_len = 512;
  return o;
}

class ArchEngine : public ::testing::TestWithParam<const char*> {};

// 24 greedy requests, some sharing a prompt prefix, prompts of 1-90 tokens and outputs of 4-60
// (past phi3's window of 48 and gemma2's 32), submitted together; then again in a cache of 24
// blocks, where they preempt one another.
TEST_P(ArchEngine, BatchedEqualsSoloAlsoUnderPreemption) {
  const std::string model_path = path_of(GetParam());
  KVSERVE_REQUIRE_SHARED_FILE(model_path);
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> solo;
  {
    GgufFile file(model_path);
    DecoderModel model(file);
    testing::ModelRunner runner(model, 8, 512);
    std::mt19937 rng(11);
    const int V = model.hparams().n_vocab;
    std::vector<int32_t> shared_prefix = {1};
    for (int k = 0; k < 20; ++k) shared_prefix.push_back(3 + static_cast<int32_t>(rng() % (V - 3)));
    for (int i = 0; i < 24; ++i) {
      std::vector<int32_t> prompt = i % 3 == 0 ? shared_prefix : std::vector<int32_t>{1};
      const int len = 1 + static_cast<int>(rng() % 70);
      for (int k = 0; k < len; ++k) prompt.push_back(3 + static_cast<int32_t>(rng() % (V - 3)));
      const int n = 4 + static_cast<int>(rng() % 57);
      solo.push_back(runner.greedy(prompt, n));
      requests.push_back(greedy_request(prompt, n));
    }
  }
  for (int32_t blocks : {512, 24}) {
    Engine engine(options(model_path, blocks * groups_of(model_path)));
    std::vector<std::shared_ptr<QueueSink>> sinks;
    for (const Request& r : requests) {
      sinks.push_back(std::make_shared<QueueSink>());
      ASSERT_TRUE(engine.submit(r, sinks.back()).ok());
    }
    for (size_t i = 0; i < requests.size(); ++i) EXPECT_EQ(collect(*sinks[i]).tokens, solo[i]) << "request " << i;
    engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));
    const EngineStats s = engine.stats();
    EXPECT_EQ(s.blocks_free, s.blocks_total);
    if (blocks == 24) {
      EXPECT_GT(s.preemptions_total, 0) << "the cache was meant to be too small";
    }
  }
}

// The attention of a captured prompt: each row a distribution (less the sink's share where the
// model has attention sinks) over the positions the layer's window lets the token see, zero
// elsewhere; and head ablation.
TEST_P(ArchEngine, InspectionOnEveryArchitecture) {
  const std::string model_path = path_of(GetParam());
  KVSERVE_REQUIRE_SHARED_FILE(model_path);
  Engine engine(options(model_path, 256));
  const ModelInfo& mi = engine.model_info();
  std::vector<int32_t> prompt = {1};
  for (int k = 0; k < 60; ++k) prompt.push_back(3 + (k * 37) % (mi.n_vocab - 3));
  const int32_t n = static_cast<int32_t>(prompt.size());
  Request r = greedy_request(prompt, 1);
  r.inspect.capture_attention = true;
  auto sink = std::make_shared<QueueSink>();
  ASSERT_TRUE(engine.submit(r, sink).ok());
  const auto out = collect(*sink);
  ASSERT_TRUE(out.completion.attention);
  const AttentionCapture* capture = out.completion.attention.get();
  ASSERT_EQ(capture->n_tokens, n);
  GgufFile file(model_path);
  const DecoderHparams hp = DecoderHparams::from_gguf(file);
  for (int l = 0; l < mi.n_layer; ++l)
    for (int h = 0; h < mi.n_head; ++h)
      for (int t = 0; t < n; ++t) {
        const float* row = capture->probs.data() + ((int64_t{l} * mi.n_head + h) * n + t) * n;
        const int w = hp.window_of(l), first = w > 0 ? std::max(0, t - w + 1) : 0;
        double sum = 0;
        for (int u = 0; u < n; ++u) {
          if (u < first || u > t) {
            ASSERT_EQ(row[u], 0.0f) << "layer " << l << " head " << h << " token " << t;
          }
          sum += row[u];
        }
        // With attention sinks (gpt-oss) the sink takes the rest of the weight.
        if (hp.spec->attn_sinks) {
          ASSERT_GT(sum, 0.0);
          ASSERT_LE(sum, 1.0 + 1e-4);
        } else {
          ASSERT_NEAR(sum, 1.0, 1e-4);
        }
      }
  // Head ablation (what HeadImportance measures): zeroing one head's output moves the prompt's
  // score; zeroing none leaves it exactly as it was.
  const auto score = [&](std::vector<HeadRef> heads) {
    Request q = greedy_request(prompt, 1);
    q.inspect.score_prompt = true;
    q.inspect.ablate_heads = std::move(heads);
    auto s = std::make_shared<QueueSink>();
    EXPECT_TRUE(engine.submit(q, s).ok());
    return collect(*s).completion.prompt_logprob_sum;
  };
  const double base = score({}), again = score({}), ablated = score({{.layer = 0, .head = 1}});
  EXPECT_EQ(base, again);
  EXPECT_GT(std::fabs(ablated - base), 1e-4) << "ablating layer 0 head 1 changed nothing";
}

// A mixture's experts as the engine reports them (what kvserve-bench-engine weighs a batch
// step's reads by): the file's expert tensors, byte for byte (these files are F32, held as
// stored), and its expert counts; zero for a dense model.
TEST_P(ArchEngine, ExpertBytesAreTheFilesExpertTensors) {
  const std::string model_path = path_of(GetParam());
  KVSERVE_REQUIRE_SHARED_FILE(model_path);
  Engine engine(options(model_path, 64));
  const ModelInfo& mi = engine.model_info();
  GgufFile file(model_path);
  const DecoderHparams hp = DecoderHparams::from_gguf(file);
  int64_t expert_bytes = 0;
  for (const GgufTensorInfo& t : file.tensors())
    if (t.name.find("_exps.weight") != std::string::npos) expert_bytes += static_cast<int64_t>(t.n_bytes());
  EXPECT_EQ(mi.expert_bytes, expert_bytes);
  EXPECT_EQ(mi.n_expert, hp.routing.n_expert);
  EXPECT_EQ(mi.n_expert_used, hp.routing.n_used);
  EXPECT_LE(mi.weight_bytes_per_step, mi.weight_bytes);
  if (expert_bytes > 0) {
    EXPECT_GT(mi.n_expert, mi.n_expert_used);
    EXPECT_LT(mi.weight_bytes_per_step, mi.weight_bytes - expert_bytes + expert_bytes / 2);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ArchEngine, ::testing::ValuesIn(kArchModels), [](const auto& info) {
  std::string n = info.param;
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
});

// phi3 (window 48 on every layer): a request of 500 tokens runs in a cache of 16 blocks of 8
// (128 tokens), holding no more than the window and a step's chunk, with the solo output; the
// capacity figures count a request as that many tokens, not max_model_len.
TEST(SlidingWindow, BlocksBehindTheWindowAreReleased) {
  const std::string model_path = path_of("tiny-phi3");
  KVSERVE_REQUIRE_SHARED_FILE(model_path);
  std::vector<int32_t> prompt = {1};
  for (int k = 0; k < 40; ++k) prompt.push_back(3 + (k * 53) % 500);
  std::vector<int32_t> want;
  {
    GgufFile file(model_path);
    DecoderModel model(file);
    testing::ModelRunner runner(model, 8, 80);
    want = runner.greedy(prompt, 459);
  }
  EngineOptions o = options(model_path, 16);
  o.scheduler.max_num_batched_tokens = 16;
  Engine engine(o);
  const ModelInfo& mi = engine.model_info();
  EXPECT_EQ(mi.sliding_window, 48);
  EXPECT_EQ(mi.kv_windowed_layers, mi.n_layer);
  EXPECT_EQ(mi.kv_groups, 1);
  // The window behind a step's first token plus the step's 16 tokens, each end in a partly used block.
  EXPECT_EQ(mi.kv_tokens_per_request, ((48 - 1 + 16 + 7) / 8 + 1) * 8);
  EXPECT_NEAR(mi.max_concurrency, 128.0 / mi.kv_tokens_per_request, 1e-9);
  auto sink = std::make_shared<QueueSink>();
  ASSERT_TRUE(engine.submit(greedy_request(prompt, 459), sink).ok());
  const auto out = collect(*sink);
  EXPECT_EQ(out.tokens, want);
  EXPECT_LE(out.completion.peak_kv_bytes, mi.kv_tokens_per_request / 8 * (mi.kv_bytes_per_token * 8));
  std::printf("phi3: 500 tokens through a 128-token cache, peak %lld bytes of KV (%lld tokens' worth)\n",
              static_cast<long long>(out.completion.peak_kv_bytes),
              static_cast<long long>(out.completion.peak_kv_bytes / mi.kv_bytes_per_token));

  // gemma2 windows alternate layers: theirs are released, the others' kept, and a request
  // counts as the full layers' max_model_len plus the windowed layers' window and chunk.
  KVSERVE_REQUIRE_SHARED_FILE(path_of("tiny-gemma2"));
  Engine gemma(options(path_of("tiny-gemma2"), 256));
  const ModelInfo& g = gemma.model_info();
  EXPECT_EQ(g.sliding_window, 32);
  EXPECT_GT(g.kv_windowed_layers, 0);
  EXPECT_EQ(g.kv_windowed_layers + g.kv_full_layers, g.n_layer);
  EXPECT_EQ(g.kv_request_token_layers_full, int64_t{g.kv_full_layers} * 512);
  EXPECT_EQ(g.kv_request_token_layers_windowed, int64_t{g.kv_windowed_layers} * ((32 - 1 + 64 + 7) / 8 + 1) * 8);
  EXPECT_LT(g.kv_tokens_per_request, 512);
}

}  // namespace
}  // namespace kvserve
