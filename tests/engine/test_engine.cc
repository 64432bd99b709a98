// The engine end to end: continuous batching gives every request exactly its solo output,
// also under preemption; cancellation frees blocks; seeds reproduce across batches; stop
// strings, refusals, overload and deadlines.
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "engine_harness.h"
#include "gguf/gguf.h"
#include "model/synthetic.h"
#include "model_runner.h"
#include "test_support.h"

namespace kvserve {
namespace {

using testing::collect;
using testing::greedy_request;
using testing::Outcome;
using testing::shared_model;

std::string synthetic_mha() {
  static const std::string path = [] {
    std::string p = std::string(KVSERVE_BINARY_DIR) + "/test-engine-mha.gguf";
    write_synthetic_model({.dim = 64, .layers = 2, .heads = 4, .kv_heads = 4, .ffn = 96, .vocab = 300,
                           .context = 512, .seed = 21},
                          p);
    return p;
  }();
  return path;
}

EngineOptions options(const std::string& model, int32_t num_blocks, int32_t max_seqs = 16, int32_t budget = 64) {
  EngineOptions o;
  o.model.path = model;
  o.cache.block_size = 8;
  o.cache.num_blocks = num_blocks;
  o.scheduler.max_num_seqs = max_seqs;
  o.scheduler.max_num_batched_tokens = budget;
  o.scheduler.max_model_len = 512;
  return o;
}

struct Workload {
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> solo;
};

// 32 greedy requests with mixed prompt and output lengths, and their solo outputs computed
// without the engine (straight through the model, one sequence at a time).
Workload make_workload(const std::string& model_path, uint32_t seed) {
  GgufFile file(model_path);
  DecoderModel model(file);
  const int V = model.hparams().n_vocab;
  testing::ModelRunner runner(model, 8, 512);
  std::mt19937 rng(seed);
  Workload w;
  for (int i = 0; i < 32; ++i) {
    std::vector<int32_t> prompt = {1};
    const int len = 1 + static_cast<int>(rng() % 70);
    for (int k = 0; k < len; ++k) prompt.push_back(3 + static_cast<int32_t>(rng() % (V - 3)));
    const int n = 4 + static_cast<int>(rng() % 40);
    w.solo.push_back(runner.greedy(prompt, n));
    w.requests.push_back(greedy_request(prompt, n));
  }
  return w;
}

// Each request alone through the engine, one after another: the solo outputs of that engine.
std::vector<std::vector<int32_t>> one_at_a_time(Engine& engine, const std::vector<Request>& reqs) {
  std::vector<std::vector<int32_t>> out;
  for (const Request& r : reqs) {
    auto sink = std::make_shared<QueueSink>();
    EXPECT_TRUE(engine.submit(r, sink).ok());
    out.push_back(collect(*sink).tokens);
  }
  return out;
}

// Submits the requests one after another, each only once the previous one has produced its
// first event, so they join the running batch at different steps.
std::vector<Outcome> run_staggered(Engine& engine, const std::vector<Request>& reqs) {
  std::vector<std::shared_ptr<QueueSink>> sinks;
  std::vector<Outcome> outs(reqs.size());
  std::vector<std::optional<Event>> first(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    sinks.push_back(std::make_shared<QueueSink>());
    SubmitResult r = engine.submit(reqs[i], sinks[i]);
    EXPECT_TRUE(r.ok()) << r.message;
    first[i] = sinks[i]->pop(std::chrono::seconds(60));
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (first[i] && first[i]->completion) {
      outs[i].tokens = first[i]->token_ids;
      outs[i].completion = *first[i]->completion;
      continue;
    }
    Outcome rest = collect(*sinks[i]);
    outs[i] = rest;
    if (first[i]) outs[i].tokens.insert(outs[i].tokens.begin(), first[i]->token_ids.begin(), first[i]->token_ids.end());
  }
  return outs;
}

void expect_batched_equals_solo(const std::string& model, int32_t num_blocks, bool expect_preemption) {
  Workload w = make_workload(model, 5);
  Engine engine(options(model, num_blocks));
  const auto t0 = std::chrono::steady_clock::now();
  auto outs = run_staggered(engine, w.requests);
  for (size_t i = 0; i < outs.size(); ++i) {
    EXPECT_EQ(outs[i].tokens, w.solo[i]) << "request " << i;
    EXPECT_EQ(outs[i].completion.reason, FinishReason::kLength);
  }
  engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EngineStats s = engine.stats();
  // The loop's time in steps holds its time in forward passes and fits in the run's wall time.
  EXPECT_GT(s.forward_seconds_total, 0.0);
  EXPECT_LE(s.forward_seconds_total, s.busy_seconds_total);
  EXPECT_LE(s.busy_seconds_total, wall);
  EXPECT_EQ(s.blocks_free, s.blocks_total);
  EXPECT_EQ(s.running, 0);
  EXPECT_EQ(s.waiting, 0);
  if (expect_preemption)
    EXPECT_GT(s.preemptions_total, 0) << "the cache was meant to be too small";
  else
    EXPECT_EQ(s.preemptions_total, 0);
  std::printf("steps %lld, preemptions %lld\n", static_cast<long long>(s.steps_total),
              static_cast<long long>(s.preemptions_total));
}

TEST(Engine, StaggeredBatchEqualsSoloStories260K) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  expect_batched_equals_solo(shared_model("stories260K.gguf"), 512, false);
}

TEST(Engine, StaggeredBatchEqualsSoloSyntheticMha) { expect_batched_equals_solo(synthetic_mha(), 512, false); }

TEST(Engine, SmallCachePreemptsAndStillEqualsSolo) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  // 24 blocks of 8 tokens: the largest request needs 14, all 32 together need far more.
  expect_batched_equals_solo(shared_model("stories260K.gguf"), 24, true);
}

TEST(Engine, SmallCachePreemptsSyntheticMha) { expect_batched_equals_solo(synthetic_mha(), 24, true); }

// q8_0: 34 bytes per 32 values, so the same budget holds 64/34 = 1.88x the f16 tokens; batched
// output still equals solo output.
TEST(Engine, Q8KvCacheBatchEqualsSoloAndHolds188xTheTokens) {
  const std::string model = synthetic_mha();
  Workload w = make_workload(model, 5);
  EngineOptions o = options(model, 0);
  o.cache.memory_bytes = 4 << 20;
  o.cache.dtype = "f16";
  const int64_t f16_tokens = Engine(o).model_info().token_capacity;
  o.cache.dtype = "q8_0";
  Engine engine(o);
  const ModelInfo& mi = engine.model_info();
  EXPECT_EQ(mi.kv_element_size, "34/32");
  EXPECT_EQ(mi.kv_bytes_per_token, 2 * 2 * 4 * 16 * 34 / 32);  // K,V x layers x KV heads x dim x 34/32
  EXPECT_NEAR(static_cast<double>(mi.token_capacity) / f16_tokens, 64.0 / 34.0, 0.01);
  const std::vector<std::vector<int32_t>> solo = one_at_a_time(engine, w.requests);
  auto outs = run_staggered(engine, w.requests);
  for (size_t i = 0; i < outs.size(); ++i) EXPECT_EQ(outs[i].tokens, solo[i]) << "request " << i;

  // A model whose K/V rows are not whole blocks of 32 values is refused, naming the field.
  const std::string odd = std::string(KVSERVE_BINARY_DIR) + "/test-engine-kv36.gguf";
  write_synthetic_model({.dim = 36, .layers = 1, .heads = 6, .kv_heads = 6, .ffn = 32, .vocab = 300, .context = 64}, odd);
  EngineOptions bad = options(odd, 64);
  bad.scheduler.max_model_len = 64;
  bad.cache.dtype = "q8_0";
  try {
    Engine e(bad);
    ADD_FAILURE() << "a q8_0 cache of 36-value rows was accepted";
  } catch (const ConfigError& err) {
    EXPECT_NE(std::string(err.what()).find("cache.dtype"), std::string::npos) << err.what();
  }
}

TEST(Engine, HalfKvCacheBatchEqualsSoloAndHalvesBytesPerToken) {
  const std::string model = synthetic_mha();
  Workload w = make_workload(model, 5);
  EngineOptions o = options(model, 512);
  o.cache.dtype = "f16";
  Engine engine(o);
  EXPECT_EQ(engine.model_info().kv_element_bytes, 2);
  EXPECT_EQ(engine.model_info().kv_bytes_per_token, 2 * 2 * 4 * 16 * 2);  // K,V x layers x KV heads x dim x 2
  const std::vector<std::vector<int32_t>> solo = one_at_a_time(engine, w.requests);
  auto outs = run_staggered(engine, w.requests);
  int same_as_f32 = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    EXPECT_EQ(outs[i].tokens, solo[i]) << "request " << i;
    same_as_f32 += solo[i] == w.solo[i];
  }
  // Half-precision K/V moves logits by ~1e-3: greedy choices almost always stay the same.
  EXPECT_GE(same_as_f32, 24) << "of 32 requests kept their f32 output";
  std::printf("f16 KV cache: %d of 32 greedy outputs identical to f32\n", same_as_f32);
}

TEST(Engine, CancelMidPromptAndMidDecodeFreesBlocks) {
  const std::string model = synthetic_mha();
  Workload w = make_workload(model, 9);
  Engine engine(options(model, 256, 16, 16));  // 16 tokens a step: a 300-token prompt takes 19 steps
  std::vector<int32_t> long_prompt(300, 5);
  long_prompt[0] = 1;
  // b decodes first; a's long prompt then runs 15 tokens a step beside b's decodes.
  auto mid_decode = std::make_shared<QueueSink>();
  SubmitResult b = engine.submit(greedy_request({1, 7, 8}, 200), mid_decode);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(mid_decode->pop(std::chrono::seconds(30)));
  auto mid_prompt = std::make_shared<QueueSink>();
  SubmitResult a = engine.submit(greedy_request(long_prompt, 20), mid_prompt);
  ASSERT_TRUE(a.ok());
  std::vector<std::shared_ptr<QueueSink>> others;
  for (int i = 0; i < 6; ++i) {
    others.push_back(std::make_shared<QueueSink>());
    ASSERT_TRUE(engine.submit(w.requests[i], others.back()).ok());
  }
  // Cancel a while its prompt is still being computed, b after a few of its tokens.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(mid_decode->pop(std::chrono::seconds(30)));
  engine.cancel(a.id);
  engine.cancel(b.id);
  Outcome oa = collect(*mid_prompt), ob = collect(*mid_decode);
  EXPECT_EQ(oa.completion.reason, FinishReason::kCancelled);
  EXPECT_EQ(oa.completion.completion_tokens, 0) << "a was meant to be cancelled mid-prompt";
  EXPECT_EQ(ob.completion.reason, FinishReason::kCancelled);
  EXPECT_GE(ob.completion.completion_tokens, 3);
  EXPECT_LT(ob.completion.completion_tokens, 200);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(collect(*others[i]).tokens, w.solo[i]);
  engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));
  EXPECT_EQ(engine.stats().blocks_free, engine.stats().blocks_total);
  engine.cancel(12345);  // unknown ids (and after shutdown) are harmless
}

TEST(Engine, SeededSamplingIsReproducibleAcrossBatchCompositions) {
  const std::string model = synthetic_mha();
  Request r = greedy_request({1, 50, 60, 70}, 40);
  r.sampling.temperature = 0.9f;
  r.sampling.top_p = 0.95f;
  r.sampling.top_k = 50;
  r.sampling.seed = 1234;
  std::vector<int32_t> alone, crowded, other_seed;
  {
    Engine engine(options(model, 256));
    auto sink = std::make_shared<QueueSink>();
    ASSERT_TRUE(engine.submit(r, sink).ok());
    alone = collect(*sink).tokens;
  }
  {
    Engine engine(options(model, 256));
    std::vector<std::shared_ptr<QueueSink>> noise;
    for (int i = 0; i < 7; ++i) {
      Request n = r;
      n.prompt = {1, static_cast<int32_t>(10 + i), 20};
      n.sampling.seed = 99 + i;
      noise.push_back(std::make_shared<QueueSink>());
      ASSERT_TRUE(engine.submit(n, noise.back()).ok());
      if (i == 3) {
        auto sink = std::make_shared<QueueSink>();
        ASSERT_TRUE(engine.submit(r, sink).ok());
        crowded = collect(*sink).tokens;
      }
    }
    Request s2 = r;
    s2.sampling.seed = 4321;
    auto sink = std::make_shared<QueueSink>();
    ASSERT_TRUE(engine.submit(s2, sink).ok());
    other_seed = collect(*sink).tokens;
    for (auto& n : noise) collect(*n);
  }
  EXPECT_EQ(alone, crowded);
  EXPECT_NE(alone, other_seed);
}

TEST(Engine, StopStringsAndStopTokens) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  Engine engine(options(shared_model("stories260K.gguf"), 256));
  // Greedy from BOS: "Once upon a time, there was a little girl named Lily." "irl na" spans
  // the pieces "ir", "l" and "▁named".
  Request r = greedy_request({1}, 100);
  r.sampling.stop = {"irl na", "never appears"};
  auto sink = std::make_shared<QueueSink>();
  ASSERT_TRUE(engine.submit(r, sink).ok());
  Outcome o = collect(*sink);
  EXPECT_EQ(o.text, "Once upon a time, there was a little g");
  EXPECT_EQ(o.completion.reason, FinishReason::kStopString);

  Request t = greedy_request({1}, 100);
  t.sampling.stop_token_ids = {261};  // "▁a"
  sink = std::make_shared<QueueSink>();
  ASSERT_TRUE(engine.submit(t, sink).ok());
  o = collect(*sink);
  EXPECT_EQ(o.tokens, (std::vector<int32_t>{403, 407, 261}));
  EXPECT_EQ(o.text, "Once upon");
  EXPECT_EQ(o.completion.reason, FinishReason::kStop);
}

// The model is loaded on the engine's loop thread; a load or sizing error must still reach the
// constructor's caller as the exception that names the file or field, with the thread joined.
TEST(Engine, LoadErrorsReachTheCallerNamingTheFileOrField) {
  auto message_of = [](const EngineOptions& o) {
    try {
      Engine engine(o);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no exception");
  };
  const std::string missing = std::string(KVSERVE_BINARY_DIR) + "/no-such-model.gguf";
  EXPECT_NE(message_of(options(missing, 64)).find("no-such-model.gguf"), std::string::npos);
  EngineOptions too_long = options(synthetic_mha(), 64);
  too_long.scheduler.max_model_len = 4096;  // the model's context is 512
  EXPECT_NE(message_of(too_long).find("scheduler.max_model_len"), std::string::npos);
  EngineOptions tiny = options(synthetic_mha(), 0);
  tiny.cache.memory_bytes = 1;
  EXPECT_NE(message_of(tiny).find("cache.memory_bytes"), std::string::npos);
  // And a good engine still starts and serves after them.
  Engine engine(options(synthetic_mha(), 64));
  auto sink = std::make_shared<QueueSink>();
  ASSERT_TRUE(engine.submit(greedy_request({1, 5, 7}, 4), sink).ok());
  EXPECT_EQ(collect(*sink).tokens.size(), 4u);
}

TEST(Engine, RefusesInvalidAndImpossibleRequests) {
  Engine engine(options(synthetic_mha(), 64));
  auto sink = std::make_shared<QueueSink>();
  auto code = [&](Request r) { return engine.submit(r, sink); };
  EXPECT_EQ(code(greedy_request({}, 5)).code, SubmitCode::kInvalidArgument);
  SubmitResult oov = code(greedy_request({1, 300}, 5));
  EXPECT_EQ(oov.code, SubmitCode::kInvalidArgument);
  EXPECT_NE(oov.message.find("prompt_token_ids[1]"), std::string::npos);
  Request bad = greedy_request({1}, 5);
  bad.sampling.top_p = 0.0f;
  EXPECT_NE(code(bad).message.find("sampling.top_p"), std::string::npos);
  bad = greedy_request({1}, 5);
  bad.sampling.temperature = -1.0f;
  EXPECT_NE(code(bad).message.find("sampling.temperature"), std::string::npos);
  bad = greedy_request({1}, 5);
  bad.sampling.stop = std::vector<std::string>(17, "x");
  EXPECT_NE(code(bad).message.find("sampling.stop"), std::string::npos);
  // 400 prompt + 200 new > max_model_len 512: never fits.
  EXPECT_EQ(code(greedy_request(std::vector<int32_t>(400, 1), 200)).code, SubmitCode::kNeverFits);
  // 500 tokens need 63 blocks of 8: fits max_model_len, and the 64-block cache.
  EXPECT_TRUE(code(greedy_request(std::vector<int32_t>(490, 1), 10)).ok());
  collect(*sink);
}

TEST(Engine, OverloadRefusesBeyondMaxWaitingAndCompletesTheRest) {
  EngineOptions o = options(synthetic_mha(), 256, 1);
  o.scheduler.max_waiting = 3;
  Engine engine(o);
  std::vector<std::shared_ptr<QueueSink>> accepted;
  int overloaded = 0;
  for (int i = 0; i < 12; ++i) {
    auto sink = std::make_shared<QueueSink>();
    SubmitResult r = engine.submit(greedy_request({1, 2, 3}, 100), sink);
    if (r.ok())
      accepted.push_back(sink);
    else if (r.code == SubmitCode::kOverloaded)
      ++overloaded;
  }
  EXPECT_GT(overloaded, 0);
  EXPECT_GE(accepted.size(), 3u);
  for (auto& s : accepted) EXPECT_EQ(collect(*s).completion.reason, FinishReason::kLength);
}

TEST(Engine, BackgroundWorkDoesNotCountAgainstMaxWaitingAndEqualsInteractive) {
  EngineOptions o = options(synthetic_mha(), 256, 2);
  o.scheduler.max_waiting = 2;
  o.scheduler.background_tokens_per_step = 8;
  Engine engine(o);
  // Forty background requests with max_waiting 2: all accepted, none refused as overloaded.
  std::vector<std::shared_ptr<QueueSink>> background;
  for (int i = 0; i < 40; ++i) {
    Request r = greedy_request({1, static_cast<int32_t>(5 + i), 7, 8, 9, 10, 11, 12, 13, 14}, 3);
    r.priority = Priority::kBackground;
    auto sink = std::make_shared<QueueSink>();
    ASSERT_TRUE(engine.submit(std::move(r), sink).ok()) << "background request " << i;
    background.push_back(sink);
  }
  // Interactive ones are still limited by max_waiting.
  std::vector<std::shared_ptr<QueueSink>> interactive;
  int overloaded = 0;
  for (int i = 0; i < 12; ++i) {
    auto sink = std::make_shared<QueueSink>();
    SubmitResult r = engine.submit(greedy_request({1, 2, 3}, 60), sink);
    if (r.ok()) interactive.push_back(sink);
    else if (r.code == SubmitCode::kOverloaded) ++overloaded;
  }
  EXPECT_GT(overloaded, 0);
  // Priority changes when work runs, never what it computes.
  Engine solo(options(synthetic_mha(), 256));
  for (size_t i = 0; i < background.size(); ++i) {
    Outcome b = collect(*background[i]);
    auto ref = std::make_shared<QueueSink>();
    ASSERT_TRUE(solo.submit(greedy_request({1, static_cast<int32_t>(5 + i), 7, 8, 9, 10, 11, 12, 13, 14}, 3), ref).ok());
    EXPECT_EQ(b.tokens, collect(*ref).tokens) << i;
  }
  for (auto& s : interactive) EXPECT_EQ(collect(*s).completion.reason, FinishReason::kLength);
}

TEST(Engine, DeadlineAbortsTheRequest) {
  Engine engine(options(synthetic_mha(), 256));
  Request r = greedy_request({1, 2}, 500);
  r.deadline_ms = 1;
  auto sink = std::make_shared<QueueSink>();
  ASSERT_TRUE(engine.submit(r, sink).ok());
  Outcome o = collect(*sink);
  EXPECT_EQ(o.completion.reason, FinishReason::kDeadline);
  EXPECT_LT(o.completion.completion_tokens, 500);
}

TEST(Engine, ShutdownRefusesNewRequestsAndCancelsTheRest) {
  Engine engine(options(synthetic_mha(), 256, 1));
  std::vector<std::shared_ptr<QueueSink>> sinks;
  for (int i = 0; i < 4; ++i) {
    sinks.push_back(std::make_shared<QueueSink>());
    ASSERT_TRUE(engine.submit(greedy_request({1, 2}, 400), sinks.back()).ok());
  }
  engine.shutdown(Engine::Shutdown::kDrain, std::chrono::milliseconds(1));
  for (auto& s : sinks) {
    FinishReason r = collect(*s).completion.reason;
    EXPECT_TRUE(r == FinishReason::kCancelled || r == FinishReason::kLength);
  }
  EXPECT_EQ(engine.submit(greedy_request({1}, 1), sinks[0]).code, SubmitCode::kShuttingDown);
}

// A front end whose sink throws (it could not serialise an event, say) must not take the
// engine loop down with every other request: that request ends with an error, the others
// complete as if alone.
TEST(Engine, ASinkThatThrowsEndsOnlyItsRequest) {
  class Throwing final : public ResultSink {
   public:
    void on_event(Event event) override {
      if (event.completion) {
        std::lock_guard lock(mu);
        final_reason = event.completion->reason;
        done = true;
        return;
      }
      throw std::runtime_error("cannot write this event");
    }
    std::mutex mu;
    bool done = false;
    FinishReason final_reason = FinishReason::kLength;
  };
  Engine engine(options(synthetic_mha(), 256));
  auto solo_sink = std::make_shared<QueueSink>();
  ASSERT_TRUE(engine.submit(greedy_request({1, 2, 3}, 24), solo_sink).ok());
  const Outcome solo = collect(*solo_sink);
  auto bad = std::make_shared<Throwing>();
  auto good = std::make_shared<QueueSink>();
  ASSERT_TRUE(engine.submit(greedy_request({4, 5}, 24), bad).ok());
  ASSERT_TRUE(engine.submit(greedy_request({1, 2, 3}, 24), good).ok());
  const Outcome o = collect(*good);
  EXPECT_EQ(o.completion.reason, FinishReason::kLength);
  EXPECT_EQ(o.tokens, solo.tokens);
  for (int i = 0; i < 200 && !bad->done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::lock_guard lock(bad->mu);
  EXPECT_TRUE(bad->done);
  EXPECT_EQ(bad->final_reason, FinishReason::kError);
  // And the engine still serves.
  auto after = std::make_shared<QueueSink>();
  ASSERT_TRUE(engine.submit(greedy_request({1, 2, 3}, 24), after).ok());
  EXPECT_EQ(collect(*after).tokens, solo.tokens);
}

}  // namespace
}  // namespace kvserve
