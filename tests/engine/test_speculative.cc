// Speculative decoding end to end, with both proposers (prompt lookup, and a draft model: this
// model's own Q4_0 file): greedy output with it equals each request's solo output computed
// straight through the model without the engine (batched, staggered, with a cache small enough
// to preempt), and proposals are really accepted; sampled requests keep a seed's tokens and end
// with every block back; requests that turn it off, and configs that are refused by field.
#include <random>
#include <regex>

#include "engine_harness.h"
#include "gguf/gguf.h"
#include "model_runner.h"
#include "test_support.h"
#include "text/tokenizer.h"

namespace kvserve {
namespace {

using testing::collect;
using testing::greedy_request;
using testing::Outcome;
using testing::shared_model;

// method "draft" proposes with the Q4_0 file of the same model; share: the draft's cache share.
EngineOptions options(int32_t num_blocks, int32_t max_batch, const std::string& method = "ngram", double share = 0.25) {
  EngineOptions o;
  o.model.path = shared_model("stories260K.gguf");
  o.cache.block_size = 8;
  o.cache.num_blocks = num_blocks;
  o.scheduler.max_num_seqs = 16;
  o.scheduler.max_num_batched_tokens = 64;
  o.scheduler.max_model_len = 512;
  o.speculative.method = method;
  o.speculative.num_tokens = 5;
  o.speculative.max_batch = max_batch;
  if (method == "draft") {
    // This draft costs about what the model does (both are tiny): adaptive proposing would
    // rightly stop, and these tests are about what verification does with proposals.
    o.speculative.adaptive = false;
    o.speculative.draft_model = shared_model("quant/stories260K-q4_0.gguf");
    o.speculative.draft_cache_share = share;
  }
  return o;
}

struct Workload {
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> solo;
};

// 24 greedy requests whose prompts are stretches of llama2.c's story for this model (which
// repeats itself), with their solo outputs from the model alone.
Workload make_workload() {
  GgufFile file(shared_model("stories260K.gguf"));
  Tokenizer tok(file);
  DecoderModel model(file);
  testing::ModelRunner runner(model, 8, 512);
  const std::vector<int32_t> story = tok.encode(testing::read_text(shared_model("stories260K.expected.txt")), true);
  std::mt19937 rng(7);
  Workload w;
  for (int i = 0; i < 24; ++i) {
    const size_t len = 4 + rng() % 120, n = 8 + rng() % 100;
    std::vector<int32_t> prompt(story.begin(), story.begin() + static_cast<int64_t>(std::min(len, story.size())));
    w.solo.push_back(runner.greedy(prompt, static_cast<int>(n)));
    w.requests.push_back(greedy_request(prompt, static_cast<int>(n)));
  }
  return w;
}

void expect_equals_solo(int32_t num_blocks, int32_t max_batch, bool expect_preemption, const std::string& method = "ngram",
                        double share = 0.25) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("quant/stories260K-q4_0.gguf"));
  const Workload w = make_workload();
  Engine engine(options(num_blocks, max_batch, method, share));
  std::vector<std::shared_ptr<QueueSink>> sinks;
  for (size_t i = 0; i < w.requests.size(); ++i) {
    sinks.push_back(std::make_shared<QueueSink>());
    ASSERT_TRUE(engine.submit(w.requests[i], sinks[i]).ok());
    if (i % 3 == 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // joins a running batch
  }
  for (size_t i = 0; i < sinks.size(); ++i) {
    const Outcome o = collect(*sinks[i]);
    EXPECT_EQ(o.tokens, w.solo[i]) << "request " << i;
    EXPECT_EQ(o.completion.reason, FinishReason::kLength);
  }
  engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.blocks_free, s.blocks_total);
  EXPECT_EQ(s.draft_blocks_free, s.draft_blocks_total) << "the draft's cache kept blocks of finished requests";
  EXPECT_GT(s.spec_drafts_total, 0);
  EXPECT_GT(s.spec_accepted_tokens_total, 0) << "no proposal was ever accepted: the test would prove nothing";
  EXPECT_LE(s.spec_accepted_tokens_total, s.spec_draft_tokens_total);
  if (expect_preemption) {
    EXPECT_GT(s.preemptions_total, 0) << "the cache was meant to be too small";
  }
  std::printf("verifications %lld, proposed %lld, accepted %lld (%.0f%%), steps %lld, preemptions %lld\n",
              static_cast<long long>(s.spec_drafts_total), static_cast<long long>(s.spec_draft_tokens_total),
              static_cast<long long>(s.spec_accepted_tokens_total),
              100.0 * s.spec_accepted_tokens_total / std::max<int64_t>(1, s.spec_draft_tokens_total),
              static_cast<long long>(s.steps_total), static_cast<long long>(s.preemptions_total));
}

TEST(Speculative, GreedyBatchEqualsSoloWithEverySequenceSpeculating) { expect_equals_solo(512, 64, false); }

TEST(Speculative, GreedyEqualsSoloWhenOnlySmallBatchesSpeculate) { expect_equals_solo(512, 4, false); }

TEST(Speculative, GreedyEqualsSoloUnderPreemption) { expect_equals_solo(28, 64, true); }

TEST(Speculative, DraftModelGreedyBatchEqualsSoloWithEverySequenceSpeculating) {
  expect_equals_solo(512, 64, false, "draft");
}

TEST(Speculative, DraftModelGreedyEqualsSoloWhenOnlySmallBatchesSpeculate) { expect_equals_solo(512, 4, false, "draft"); }

// The draft's own cache is small too here: sequences take each other's draft blocks.
TEST(Speculative, DraftModelGreedyEqualsSoloUnderPreemption) { expect_equals_solo(28, 64, true, "draft", 0.5); }

// One request alone, long enough to repeat itself: most of its tokens come from accepted
// proposals, so it takes fewer steps than tokens.
void expect_fewer_steps_than_tokens(const std::string& method) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("quant/stories260K-q4_0.gguf"));
  Engine engine(options(512, 4, method));
  const std::vector<int32_t> prompt = engine.tokenizer().encode("Once upon a time", true);
  auto sink = std::make_shared<QueueSink>();
  ASSERT_TRUE(engine.submit(greedy_request(prompt, 300), sink).ok());
  const Outcome o = collect(*sink);
  ASSERT_EQ(o.tokens.size(), 300u);
  engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));
  const EngineStats s = engine.stats();
  EXPECT_LT(s.steps_total, 300 - s.spec_accepted_tokens_total / 2) << s.spec_accepted_tokens_total << " accepted";
  EXPECT_EQ(s.steps_total + s.spec_accepted_tokens_total, 300 + 0 /* the prompt step samples the first */)
      << "every step emits one token plus those it accepted";
  std::printf("%s: %lld steps for 300 tokens, %lld of %lld proposed accepted\n", method.c_str(),
              static_cast<long long>(s.steps_total), static_cast<long long>(s.spec_accepted_tokens_total),
              static_cast<long long>(s.spec_draft_tokens_total));
}

TEST(Speculative, OneStreamTakesFewerStepsThanTokens) { expect_fewer_steps_than_tokens("ngram"); }

TEST(Speculative, DraftModelOneStreamTakesFewerStepsThanTokens) { expect_fewer_steps_than_tokens("draft"); }

// A seed gives the same tokens run after run with speculation on (the accept/replace draws come
// from the request's own generator); a request can turn it off; every block comes back.
void expect_seed_repeats_and_opt_out(const std::string& method, bool adaptive = false) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("quant/stories260K-q4_0.gguf"));
  EngineOptions o = options(512, 4, method);
  if (adaptive) o.speculative.adaptive = true;
  Engine engine(o);
  Request r = greedy_request(engine.tokenizer().encode("Once upon a time", true), 200);
  r.sampling.temperature = 0.7f;
  r.sampling.seed = 1234;
  auto run = [&](const Request& req) {
    auto sink = std::make_shared<QueueSink>();
    EXPECT_TRUE(engine.submit(req, sink).ok());
    return collect(*sink).tokens;
  };
  const auto a = run(r), b = run(r);
  EXPECT_EQ(a, b);
  // The final event is delivered inside the step; the loop publishes its counters after it.
  for (int i = 0; i < 1000 && engine.stats().requests_finished_total < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const int64_t accepted = engine.stats().spec_accepted_tokens_total;
  EXPECT_GT(accepted, 0);
  Request off = r;
  off.sampling.speculative = false;
  EXPECT_EQ(run(off).size(), 200u);
  engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.spec_accepted_tokens_total, accepted) << "a request with speculative = false speculated";
  EXPECT_EQ(s.blocks_free, s.blocks_total);
  EXPECT_EQ(s.draft_blocks_free, s.draft_blocks_total);
}

TEST(Speculative, SeededSamplingRepeatsAndRequestsCanOptOut) { expect_seed_repeats_and_opt_out("ngram"); }

TEST(Speculative, DraftModelSeededSamplingRepeatsAndRequestsCanOptOut) { expect_seed_repeats_and_opt_out("draft"); }

// Adaptive lengths with a draft: a sampled request's lengths follow fixed costs, not the clock,
// so its seed still repeats.
TEST(Speculative, DraftModelSeededSamplingRepeatsWithAdaptiveLengths) { expect_seed_repeats_and_opt_out("draft", true); }

// What a request asks for besides its tokens behaves as without speculation: a regex
// constraint, a stop string and log-probabilities (with the top 3) give the same tokens, text,
// finish reason and log-probabilities, greedy, several requests at once, with each proposer; and
// proposals were really verified and accepted along the way.
struct Full {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason reason = FinishReason::kNone;
  std::vector<TokenLogprob> logprobs;
};

Full collect_full(QueueSink& sink) {
  Full f;
  for (;;) {
    auto ev = sink.pop(std::chrono::milliseconds(120000));
    if (!ev) {
      ADD_FAILURE() << "no final event";
      return f;
    }
    f.tokens.insert(f.tokens.end(), ev->token_ids.begin(), ev->token_ids.end());
    f.text += ev->text;
    f.logprobs.insert(f.logprobs.end(), ev->logprobs.begin(), ev->logprobs.end());
    if (ev->completion) {
      f.reason = ev->completion->reason;
      return f;
    }
  }
}

TEST(Speculative, ConstraintsStopStringsAndLogprobsBehaveAsWithout) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("quant/stories260K-q4_0.gguf"));
  std::vector<Request> requests;
  {
    GgufFile file(shared_model("stories260K.gguf"));
    Tokenizer tok(file);
    const std::vector<int32_t> prompt = tok.encode("Once upon a time", true);
    Request constrained = greedy_request(prompt, 150);
    constrained.sampling.constraint.kind = OutputConstraint::Kind::kRegex;
    constrained.sampling.constraint.text = " (there was a [a-z]+ [a-z]+\\. )([A-Za-z]+[,.]? ){5,15}[a-z]+\\.";
    constrained.sampling.ignore_eos = false;
    requests.push_back(constrained);
    Request stopped = greedy_request(prompt, 250);
    stopped.sampling.stop = {"park"};
    stopped.sampling.logprobs = true;
    stopped.sampling.top_logprobs = 3;
    requests.push_back(stopped);
    Request plain = greedy_request(prompt, 200);
    plain.sampling.logprobs = true;
    requests.push_back(plain);
  }
  auto run = [&](const std::string& method) {
    EngineOptions o = options(512, 64, method);
    o.speculative.adaptive = false;  // propose every step: what is proposed then follows no clock
    Engine engine(o);
    std::vector<std::shared_ptr<QueueSink>> sinks;
    for (const Request& r : requests) {
      sinks.push_back(std::make_shared<QueueSink>());
      EXPECT_TRUE(engine.submit(r, sinks.back()).ok());
    }
    std::vector<Full> out;
    for (auto& sink : sinks) out.push_back(collect_full(*sink));
    engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));
    if (method != "off") {
      EXPECT_GT(engine.stats().spec_accepted_tokens_total, 20) << method << ": too few proposals accepted to mean much";
    }
    return out;
  };
  const std::vector<Full> off = run("off");
  ASSERT_EQ(off[0].reason, FinishReason::kStop) << "the constraint should end the text: " << off[0].text;
  EXPECT_TRUE(std::regex_match(off[0].text, std::regex(requests[0].sampling.constraint.text))) << off[0].text;
  ASSERT_EQ(off[1].reason, FinishReason::kStopString) << "the stop string never came: pick one the story reaches";
  EXPECT_EQ(off[1].text.find("park"), std::string::npos);
  for (const std::string method : {"ngram", "draft"}) {
    SCOPED_TRACE(method);
    const std::vector<Full> on = run(method);
    for (size_t i = 0; i < requests.size(); ++i) {
      EXPECT_EQ(on[i].tokens, off[i].tokens) << "request " << i;
      EXPECT_EQ(on[i].text, off[i].text) << "request " << i;
      EXPECT_EQ(on[i].reason, off[i].reason) << "request " << i;
      ASSERT_EQ(on[i].logprobs.size(), off[i].logprobs.size()) << "request " << i;
      for (size_t j = 0; j < on[i].logprobs.size(); ++j) {
        EXPECT_EQ(on[i].logprobs[j].token, off[i].logprobs[j].token);
        EXPECT_NEAR(on[i].logprobs[j].logprob, off[i].logprobs[j].logprob, 1e-4f) << "request " << i << " token " << j;
        ASSERT_EQ(on[i].logprobs[j].top.size(), off[i].logprobs[j].top.size());
        for (size_t k = 0; k < on[i].logprobs[j].top.size(); ++k)
          EXPECT_EQ(on[i].logprobs[j].top[k].first, off[i].logprobs[j].top[k].first);
      }
    }
  }
}

TEST(Speculative, ConfigErrorsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model": {"path": "m"}, "speculative": {"method": "medusa"}})", "speculative.method"},
      {R"({"model": {"path": "m"}, "speculative": {"method": "draft"}})", "speculative.draft_model"},
      {R"({"model": {"path": "m"}, "speculative": {"method": "ngram", "draft_model": "d"}})", "speculative.draft_model"},
      {R"({"model": {"path": "m"}, "speculative": {"method": "draft", "draft_model": "d", "draft_cache_share": 0}})",
       "speculative.draft_cache_share"},
      {R"({"model": {"path": "m"}, "speculative": {"method": "draft", "draft_model": "d", "draft_cache_share": "x"}})",
       "speculative.draft_cache_share"},
      {R"({"model": {"path": "m"}, "speculative": {"num_tokens": 0}})", "speculative.num_tokens"},
      {R"({"model": {"path": "m"}, "speculative": {"num_tokens": 65}})", "speculative.num_tokens"},
      {R"({"model": {"path": "m"}, "speculative": {"ngram_min": 3, "ngram_max": 2}})", "speculative.ngram_max"},
      {R"({"model": {"path": "m"}, "speculative": {"max_batch": 0}})", "speculative.max_batch"},
      {R"({"model": {"path": "m"}, "speculative": {"k": 4}})", "speculative.k"},
      {R"({"model": {"path": "m"}, "speculative": {"adaptive": 1}})", "speculative.adaptive"},
  };
  for (const auto& [text, field] : cases) {
    try {
      validate(engine_options_from_json(nlohmann::json::parse(text)));
      ADD_FAILURE() << "accepted " << text;
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(field + ":", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace kvserve
