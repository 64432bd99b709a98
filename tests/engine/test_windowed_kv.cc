// The KV cache of models with sliding-window layers (kv_cache/kv_layout.h): windowed layers
// release the blocks behind their window while full layers keep theirs, so a long request holds
// about n_full · T + n_windowed · W token-layers, with the output of a cache that keeps
// everything (an independent run with one block table for every layer).
#include <gtest/gtest.h>

#include <random>

#include "engine_harness.h"
#include "gguf/gguf.h"
#include "model/decoder_model.h"
#include "model/synthetic.h"
#include "model_runner.h"
#include "runtime/engine.h"
#include "test_support.h"

namespace kvserve {
namespace {

using testing::collect;
using testing::greedy_request;

std::vector<int32_t> random_prompt(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p = {1};
  while (static_cast<int>(p.size()) < n) p.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
  return p;
}

// Gemma 3's shape at 8,192 tokens: 12 layers, layers 5 and 11 global, the others local with a
// window of 256; blocks of 16, steps of at most 256 tokens. A full-length request may hold no
// more than n_global · T + n_local · (W + one block + one chunk) token-layers; it runs in a
// cache of exactly that size (a quarter of what keeping every block needs, which that cache
// refuses) and generates what a cache keeping every block generates.
TEST(WindowedKv, GemmaShapedRequestHoldsTheWindowNotItsLength) {
  SyntheticSpec spec;
  spec.arch = "gemma3";
  spec.dim = 64;
  spec.layers = 12;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 16;
  spec.ffn = 128;
  spec.context = 8192;
  spec.window = 256;
  spec.window_period = 6;
  const std::string path = std::string(KVSERVE_BINARY_DIR) + "/test-windowed-gemma3.gguf";
  write_synthetic_model(spec, path);
  constexpr int64_t T = 8192, W = 256, kBlock = 16, kChunk = 256, n_global = 2, n_local = 10;
  const int64_t bound = n_global * T + n_local * (W + kBlock + kChunk);

  EngineOptions o;
  o.model.path = path;
  o.cache.block_size = kBlock;
  o.scheduler.max_num_batched_tokens = kChunk;
  o.scheduler.max_model_len = T;
  o.cache.num_blocks = 1;  // sized below from what the engine says a request holds
  const ModelInfo probe = Engine(o).model_info();
  EXPECT_EQ(probe.kv_windowed_layers, n_local);
  EXPECT_EQ(probe.kv_full_layers, n_global);
  EXPECT_EQ(probe.kv_request_token_layers_full, n_global * T);
  EXPECT_LE(probe.kv_request_token_layers_windowed, n_local * (W + kBlock + kChunk));
  EXPECT_LE(probe.kv_request_token_layers_full + probe.kv_request_token_layers_windowed, bound);
  const int64_t layer_bytes = probe.kv_bytes_per_token / probe.n_layer;
  EXPECT_EQ(probe.kv_bytes_per_request,
            (probe.kv_request_token_layers_full + probe.kv_request_token_layers_windowed) * layer_bytes);

  const std::vector<int32_t> prompt = random_prompt(static_cast<int>(T) - 64, spec.vocab, 5);
  std::vector<int32_t> want;
  {
    GgufFile file(path);
    DecoderModel model(file);
    testing::ModelRunner runner(model, kBlock, static_cast<int32_t>(T / kBlock + 2));
    want = runner.greedy(prompt, 64);
  }
  // The budget of exactly one request, in bytes (a block's bytes differ between layouts).
  o.cache.num_blocks = 0;
  o.cache.memory_bytes = probe.kv_bytes_per_request;
  {
    Engine engine(o);
    const ModelInfo& mi = engine.model_info();
    EXPECT_EQ(mi.num_blocks, probe.kv_blocks_per_request);
    EXPECT_NEAR(mi.max_concurrency, 1.0, 0.01);
    auto sink = std::make_shared<QueueSink>();
    ASSERT_TRUE(engine.submit(greedy_request(prompt, 64), sink).ok());
    const auto out = collect(*sink);
    EXPECT_EQ(out.tokens, want);
    EXPECT_LE(out.completion.peak_kv_bytes, bound * layer_bytes);
    std::printf("gemma3 shape, %lld tokens: peak %lld token-layers of KV (bound %lld; %lld without release)\n",
                static_cast<long long>(T), static_cast<long long>(out.completion.peak_kv_bytes / layer_bytes),
                static_cast<long long>(bound), static_cast<long long>(T * spec.layers));
  }
  // Keeping every block, the same cache cannot hold the request at all.
  o.cache.release_windowed_blocks = false;
  Engine keep_all(o);
  EXPECT_EQ(keep_all.model_info().kv_groups, 1);
  EXPECT_EQ(keep_all.model_info().kv_windowed_layers, 0);
  const SubmitResult r = keep_all.submit(greedy_request(prompt, 64), std::make_shared<QueueSink>());
  EXPECT_EQ(r.code, SubmitCode::kNeverFits) << r.message;
}

// tiny-gemma3 (window 32 on layers 0-4) with f16 and q8_0 caches: a request that runs far past
// the window, batched with others that share its prefix and under preemption, generates what
// one block table for every layer generates with the same cache type.
TEST(WindowedKv, HalfAndEightBitCachesMatchACacheThatKeepsEverything) {
  const std::string path = testing::shared_model("arch/tiny-gemma3.gguf");
  KVSERVE_REQUIRE_SHARED_FILE(path);
  const std::vector<int32_t> prompt = random_prompt(40, 512, 9);
  for (const char* dtype : {"f16", "q8_0"}) {
    const int32_t bytes = std::string(dtype) == "f16" ? 2 : 1;
    std::vector<int32_t> want;
    {
      GgufFile file(path);
      DecoderModel model(file);
      testing::ModelRunner runner(model, 8, 64, 0, bytes);
      want = runner.greedy(prompt, 120);
    }
    for (int32_t blocks : {600, 90}) {
      EngineOptions o;
      o.model.path = path;
      o.cache.block_size = 8;
      o.cache.num_blocks = blocks;
      o.cache.dtype = dtype;
      o.scheduler.max_num_seqs = 8;
      o.scheduler.max_num_batched_tokens = 32;
      o.scheduler.max_model_len = 256;
      Engine engine(o);
      std::vector<std::shared_ptr<QueueSink>> sinks;
      for (int i = 0; i < 4; ++i) {
        sinks.push_back(std::make_shared<QueueSink>());
        ASSERT_TRUE(engine.submit(greedy_request(prompt, 120), sinks.back()).ok());
      }
      for (auto& s : sinks) EXPECT_EQ(collect(*s).tokens, want) << dtype << ", " << blocks << " blocks";
      engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));
      const EngineStats st = engine.stats();
      EXPECT_EQ(st.blocks_free, st.blocks_total);
      if (blocks == 90) {
        EXPECT_GT(st.preemptions_total, 0) << "the cache was meant to be too small";
      }
    }
  }
}

}  // namespace
}  // namespace kvserve
