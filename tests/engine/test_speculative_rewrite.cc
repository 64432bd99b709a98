// Speculative decoding on the workload it is for: answers that copy their prompt (a rewrite).
// The model is a copier (model/synthetic_copier.h: its greedy text is what the rule of
// copier_next_token says, so it copies a document it was shown), written here in F32 with its own
// Q4_0 file as the draft. Greedy output with each proposer equals each request's solo output
// computed straight through the model, several requests at once; one stream alone accepts most
// proposals and takes far fewer steps than tokens; every block comes back.
#include <filesystem>
#include <random>

#include <unistd.h>

#include "engine_harness.h"
#include "gguf/gguf.h"
#include "model/synthetic.h"
#include "model_runner.h"

namespace kvserve {
namespace {

using testing::collect;
using testing::greedy_request;
using testing::Outcome;

class RewriteTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    SyntheticSpec s;
    s.copier = true;
    s.dim = 512;
    s.layers = 3;
    s.heads = 4;
    s.kv_heads = 4;
    s.ffn = 128;
    s.vocab = 2048;
    s.context = 512;
    const std::string base = (std::filesystem::temp_directory_path() / ("kvserve-rewrite-" + std::to_string(::getpid()))).string();
    model_ = new std::string(base + "-f32.gguf");
    draft_ = new std::string(base + "-q4_0.gguf");
    write_synthetic_model(s, *model_, "F32");
    write_synthetic_model(s, *draft_, "Q4_0");
  }
  static void TearDownTestSuite() {
    std::filesystem::remove(*model_);
    std::filesystem::remove(*draft_);
    delete model_;
    delete draft_;
  }

  static EngineOptions options(const std::string& method) {
    EngineOptions o;
    o.model.path = *model_;
    o.cache.block_size = 16;
    o.cache.num_blocks = 256;
    o.scheduler.max_num_seqs = 8;
    o.scheduler.max_model_len = 512;
    o.speculative.method = method;
    o.speculative.num_tokens = 6;
    o.speculative.max_batch = 8;
    if (method == "draft") {
      o.speculative.draft_model = *draft_;
      // A draft of this size costs what the model does: adaptive proposing would rightly stop.
      o.speculative.adaptive = false;
    }
    return o;
  }

  // A document of 150 tokens drawn from 60, a separator, and its first two tokens: the answer
  // copies it.
  static std::vector<int32_t> rewrite_prompt(uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<int32_t> p = {1};
    for (int i = 0; i < 150; ++i) p.push_back(static_cast<int32_t>(300 + rng() % 60));
    p.push_back(2000);
    p.push_back(p[1]);
    p.push_back(p[2]);
    return p;
  }

  static std::string* model_;
  static std::string* draft_;
};

std::string* RewriteTest::model_ = nullptr;
std::string* RewriteTest::draft_ = nullptr;

void expect_batch_equals_solo(const EngineOptions& o, const std::vector<std::vector<int32_t>>& prompts, int n) {
  std::vector<std::vector<int32_t>> solo;
  {
    GgufFile file(o.model.path);
    DecoderModel model(file);
    testing::ModelRunner runner(model, 16, 64);
    for (const auto& p : prompts) solo.push_back(runner.greedy(p, n));
  }
  Engine engine(o);
  std::vector<std::shared_ptr<QueueSink>> sinks;
  for (const auto& p : prompts) {
    sinks.push_back(std::make_shared<QueueSink>());
    ASSERT_TRUE(engine.submit(greedy_request(p, n), sinks.back()).ok());
  }
  for (size_t i = 0; i < sinks.size(); ++i) EXPECT_EQ(collect(*sinks[i]).tokens, solo[i]) << "request " << i;
  engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.blocks_free, s.blocks_total);
  EXPECT_EQ(s.draft_blocks_free, s.draft_blocks_total);
  EXPECT_GT(s.spec_accepted_tokens_total, s.spec_draft_tokens_total / 2) << o.speculative.method;
}

TEST_F(RewriteTest, GreedyBatchEqualsSoloWithPromptLookup) {
  expect_batch_equals_solo(options("ngram"), {rewrite_prompt(1), rewrite_prompt(2), rewrite_prompt(3), rewrite_prompt(4)},
                           120);
}

// Up to 48 proposed tokens a sequence: verification passes of dozens of rows of one sequence.
TEST_F(RewriteTest, GreedyBatchEqualsSoloWithLongProposals) {
  EngineOptions o = options("ngram");
  o.speculative.num_tokens = 48;
  o.speculative.adaptive = false;  // always as many as the lookup finds
  expect_batch_equals_solo(o, {rewrite_prompt(11), rewrite_prompt(12)}, 150);
}

TEST_F(RewriteTest, GreedyBatchEqualsSoloWithTheQuantizedSelfAsDraft) {
  expect_batch_equals_solo(options("draft"), {rewrite_prompt(5), rewrite_prompt(6), rewrite_prompt(7)}, 120);
}

// Alone, a copying stream is nearly all accepted proposals: each step emits its own token and
// those it accepted, so the steps are a fraction of the tokens.
void expect_few_steps(const EngineOptions& o, const std::vector<int32_t>& prompt) {
  Engine engine(o);
  auto sink = std::make_shared<QueueSink>();
  const int n = 200;
  ASSERT_TRUE(engine.submit(greedy_request(prompt, n), sink).ok());
  ASSERT_EQ(collect(*sink).tokens.size(), static_cast<size_t>(n));
  engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));
  const EngineStats s = engine.stats();
  EXPECT_EQ(s.steps_total + s.spec_accepted_tokens_total, n);
  EXPECT_GE(s.spec_accepted_tokens_total * 10, s.spec_draft_tokens_total * 8) << "accepted of proposed";
  EXPECT_LT(s.steps_total, n / 3);
  std::printf("%s: %lld steps for %d tokens, %lld of %lld proposed accepted\n", o.speculative.method.c_str(),
              static_cast<long long>(s.steps_total), n, static_cast<long long>(s.spec_accepted_tokens_total),
              static_cast<long long>(s.spec_draft_tokens_total));
}

TEST_F(RewriteTest, OneStreamAcceptsMostProposalsWithPromptLookup) { expect_few_steps(options("ngram"), rewrite_prompt(8)); }

TEST_F(RewriteTest, OneStreamAcceptsMostProposalsWithTheQuantizedSelfAsDraft) {
  expect_few_steps(options("draft"), rewrite_prompt(9));
}

}  // namespace
}  // namespace kvserve
