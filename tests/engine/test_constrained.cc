// Constrained requests through the engine: a constrained request batched with others and under
// preemption gives exactly what it gives alone (the same seed: the invariant batched == solo);
// every output respects its constraint (checked by an independent parse); EOS only where the
// grammar is complete; bad constraints refused naming the field; logit_bias against the
// unbiased greedy output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <regex>

#include "engine_harness.h"
#include "test_support.h"

namespace kvserve {
namespace {

using testing::collect;
using testing::shared_model;

EngineOptions options(int32_t num_blocks) {
  EngineOptions o;
  o.model.path = shared_model("stories260K.gguf");
  o.cache.block_size = 8;
  o.cache.num_blocks = num_blocks;
  o.scheduler.max_model_len = 512;
  return o;
}

Request sampled(OutputConstraint c, uint64_t seed, int max_new = 120) {
  Request r;
  r.prompt = {1, 403, 261, 300};
  r.sampling.temperature = 1.0f;
  r.sampling.seed = seed;
  r.sampling.max_new_tokens = max_new;
  r.sampling.constraint = std::move(c);
  return r;
}

OutputConstraint schema(const char* s) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kJsonSchema;
  c.text = s;
  return c;
}

const char* kPerson =
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":10},"age":{"type":"integer","minimum":0,"maximum":99}},"required":["name","age"]})";

TEST(ConstrainedEngine, BatchedAndPreemptedEqualSoloAndRespectTheConstraint) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  OutputConstraint re;
  re.kind = OutputConstraint::Kind::kRegex;
  re.text = "(yes|no|maybe), ([a-z]+ ){30,40}[a-z]+\\.";
  std::vector<Request> reqs;
  for (uint64_t s = 0; s < 6; ++s) reqs.push_back(sampled(s % 2 ? schema(kPerson) : re, 100 + s));
  std::vector<testing::Outcome> solo;
  {
    Engine engine(options(256));
    for (const Request& r : reqs) {
      auto sink = std::make_shared<QueueSink>();
      ASSERT_TRUE(engine.submit(r, sink).ok());
      solo.push_back(collect(*sink));
    }
  }
  // All at once in a cache so small that requests are preempted and recomputed.
  Engine engine(options(16));
  std::vector<std::shared_ptr<QueueSink>> sinks;
  for (const Request& r : reqs) {
    sinks.push_back(std::make_shared<QueueSink>());
    ASSERT_TRUE(engine.submit(r, sinks.back()).ok());
  }
  int stopped = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    const testing::Outcome o = collect(*sinks[i]);
    EXPECT_EQ(o.tokens, solo[i].tokens) << "request " << i;
    EXPECT_EQ(o.text, solo[i].text);
    if (o.completion.reason != FinishReason::kStop) continue;
    ++stopped;
    if (i % 2) {
      const nlohmann::json v = nlohmann::json::parse(o.text, nullptr, false);
      ASSERT_FALSE(v.is_discarded()) << o.text;
      EXPECT_TRUE(v["name"].is_string() && v["name"].get<std::string>().size() <= 10 * 4) << o.text;
      EXPECT_TRUE(v["age"].is_number_integer() && v["age"] >= 0 && v["age"] <= 99) << o.text;
    } else {
      EXPECT_TRUE(std::regex_match(o.text, std::regex(re.text))) << o.text;
    }
  }
  EXPECT_GE(stopped, 4);
  EXPECT_GT(engine.stats().preemptions_total, 0) << "the small cache was meant to preempt";
}

TEST(ConstrainedEngine, GreedyChoiceEndsAtTheChoiceAndBadConstraintsAreRefused) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  Engine engine(options(128));
  OutputConstraint choice;
  choice.kind = OutputConstraint::Kind::kChoice;
  choice.choices = {"Once upon a time", "Lily", "The end"};
  Request r = sampled(choice, 1, 50);
  r.sampling.temperature = 0.0f;
  r.sampling.ignore_eos = true;  // a complete grammar ends the request even so
  auto sink = std::make_shared<QueueSink>();
  ASSERT_TRUE(engine.submit(r, sink).ok());
  const testing::Outcome o = collect(*sink);
  EXPECT_EQ(o.completion.reason, FinishReason::kStop);
  EXPECT_TRUE(o.text == "Once upon a time" || o.text == "Lily" || o.text == "The end") << o.text;

  const std::vector<std::pair<OutputConstraint, std::string>> bad = {
      {schema(R"({"type":"object","properties":{"a":{"not":{}}}})"), "keyword 'not' is not supported at #/properties/a"},
      {schema("{oops"), "not valid JSON"},
      {[] {
         OutputConstraint c;
         c.kind = OutputConstraint::Kind::kGrammar;
         c.text = "root ::= root \"x\"";
         return c;
       }(),
       "can reach itself"},
  };
  for (const auto& [c, want] : bad) {
    const SubmitResult res = engine.submit(sampled(c, 1), std::make_shared<QueueSink>());
    EXPECT_EQ(res.code, SubmitCode::kInvalidArgument);
    EXPECT_EQ(res.message.rfind("sampling.constraint: ", 0), 0u) << res.message;
    EXPECT_NE(res.message.find(want), std::string::npos) << res.message;
  }
}

TEST(ConstrainedEngine, LogitBiasMovesGreedyOutputAsTheReferenceSays) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  Engine engine(options(128));
  Request r = testing::greedy_request({1, 403, 261}, 12);
  auto run = [&](const Request& q) {
    auto sink = std::make_shared<QueueSink>();
    EXPECT_TRUE(engine.submit(q, sink).ok());
    return collect(*sink).tokens;
  };
  const std::vector<int32_t> plain = run(r);
  // Banning the first greedy token moves the first token elsewhere; forcing one repeats it.
  Request banned = r;
  banned.sampling.logit_bias = {{plain[0], -100.0f}};
  EXPECT_NE(run(banned)[0], plain[0]);
  Request forced = r;
  forced.sampling.logit_bias = {{300, 100.0f}};
  EXPECT_EQ(run(forced), std::vector<int32_t>(12, 300));
  Request outside = r;
  outside.sampling.logit_bias = {{100000, 1.0f}};
  const SubmitResult res = engine.submit(outside, std::make_shared<QueueSink>());
  EXPECT_EQ(res.code, SubmitCode::kInvalidArgument);
  EXPECT_NE(res.message.find("sampling.logit_bias: token 100000"), std::string::npos) << res.message;
}

}  // namespace
}  // namespace kvserve
