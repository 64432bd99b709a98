// Every architecture in ../shared/models/arch against llama.cpp b4747 (reference-logprobs.json):
// the reference text's teacher-forced log-probabilities within 0.002 nats/token on every kernel
// level, and the greedy continuation of "Once upon a time" token for token.
#include <gtest/gtest.h>

#include "kernels/kernel_table.h"
#include "logprob_reference.h"
#include "model/model.h"
#include "test_support.h"
#include "text/tokenizer.h"

namespace kvserve {
namespace {

const char* const kArchModels[] = {"tiny-qwen2", "tiny-phi3", "tiny-gemma2", "tiny-gpt2", "tiny-llama3rope"};

class ArchFiles : public ::testing::TestWithParam<std::tuple<const char*, KernelLevel>> {
 protected:
  std::string key() const { return std::string("arch/") + std::get<0>(GetParam()) + ".gguf"; }
};

TEST_P(ArchFiles, LogProbsAgreeWithLlamaCpp) {
  KVSERVE_REQUIRE_SHARED_FILE(testing::shared_model(key()));
  const Compare c = compare(key(), key(), std::get<1>(GetParam()));
  std::printf("%s: mean |ours - llama.cpp| %.6f nats/token (max %.6f), means %.5f / %.5f\n", key().c_str(),
              c.mean_abs, c.max_abs, c.mean_ours, c.mean_ref);
  EXPECT_LE(c.mean_abs, 0.002);
}

// Greedy decoding one token a step after the prompt's prefill, as llama.cpp generated it.
TEST_P(ArchFiles, GreedyContinuationIsLlamaCpps) {
  KVSERVE_REQUIRE_SHARED_FILE(testing::shared_model(key()));
  const std::vector<int32_t> want =
      references()["models"][key()]["greedy_once_upon_a_time_32"].get<std::vector<int32_t>>();
  ASSERT_FALSE(want.empty());
  GgufFile f(testing::shared_model(key()));
  Tokenizer tok(f);
  ModelLoadOptions opt;
  opt.kernels = &kernel_table(std::get<1>(GetParam()));
  auto model = load_model(f, opt);
  const std::vector<int32_t> got = greedy(*model, tok.encode("Once upon a time", true), static_cast<int>(want.size()),
                                          tok.eos_id());
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(Models, ArchFiles,
                         ::testing::Combine(::testing::ValuesIn(kArchModels), ::testing::ValuesIn(supported_levels())),
                         [](const auto& info) {
                           std::string n = std::string(std::get<0>(info.param)) + "_" +
                                           level_name(std::get<1>(info.param));
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace kvserve
