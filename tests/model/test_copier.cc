// The copier (model/synthetic_copier.h), the synthetic model the rewrite benchmarks run on: in
// every weight type it is written in, its greedy decoding of a document it has seen picks the
// token the rule its weights implement names (copier_next_token, the rule written out directly)
// wherever the rule names one, and that is most of the time; the rule itself on hand-made cases;
// shapes a copier cannot have are refused by name.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "gguf/gguf.h"
#include "model/decoder_model.h"
#include "model/synthetic.h"
#include "model/synthetic_copier.h"
#include "model_runner.h"

namespace kvserve {
namespace {

TEST(CopierRule, FollowsTheLongestEarlierMatch) {
  EXPECT_EQ(copier_next_token({5, 6, 7, 5, 6}), 7);          // (5, 6) was followed by 7
  EXPECT_EQ(copier_next_token({1, 2, 3, 7, 9, 2, 3, 8, 1, 2, 3}), 7);  // (1, 2, 3) by 7, (2, 3) also by 8
  EXPECT_EQ(copier_next_token({9, 2, 3, 8, 2}), 3);          // (8, 2) never: 2 was followed by 3
  EXPECT_EQ(copier_next_token({1, 2, 3, 1, 2, 4, 1, 2}), -1);  // (1, 2) was followed by 3 and by 4
  EXPECT_EQ(copier_next_token({1, 2, 3, 4, 1, 2, 3, 5, 3}), -1);  // 3 by 4 and by 5, (5, 3) never
  EXPECT_EQ(copier_next_token({1, 2, 3, 4, 5, 3}), 4);       // (5, 3) never: 3 was followed by 4
  EXPECT_EQ(copier_next_token({4, 5, 6}), -1);               // 6 is new
  EXPECT_EQ(copier_next_token({}), -1);
}

SyntheticSpec small_copier() {
  SyntheticSpec s;
  s.copier = true;
  s.dim = 512;
  s.layers = 3;  // the circuit's two, and one of noise
  s.heads = 4;
  s.kv_heads = 2;  // grouped queries: positional heads share a KV head
  s.ffn = 128;
  s.vocab = 2048;
  s.context = 512;
  return s;
}

TEST(Copier, RefusesShapesWithoutRoomForTheCircuit) {
  SyntheticSpec s = small_copier();
  s.heads = 8;  // head dimension 64: too few slow rotary pairs
  s.kv_heads = 2;
  EXPECT_THROW(validate(s), std::invalid_argument);
  s = small_copier();
  s.dim = 384;
  s.heads = 3;  // head dimension 128, but no room for the slots
  s.kv_heads = 3;
  EXPECT_THROW(validate(s), std::invalid_argument);
  s = small_copier();
  s.tied_output = true;
  EXPECT_THROW(validate(s), std::invalid_argument);
  s = small_copier();
  s.arch = "qwen3";
  EXPECT_THROW(validate(s), std::invalid_argument);
  EXPECT_NO_THROW(validate(small_copier()));
}

// A document drawn from 12 tokens (so short patterns recur and the rule is often
// ambiguous), then a separator and the document's first two tokens: greedy decoding should
// copy the rest of it.
class CopierTypes : public ::testing::TestWithParam<std::string> {};

TEST_P(CopierTypes, GreedyDecodingFollowsTheRule) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("kvserve-copier-" + GetParam() + "-" + std::to_string(::getpid()) + ".gguf")).string();
  write_synthetic_model(small_copier(), path, GetParam());
  {
    GgufFile file(path);
    DecoderModel model(file);
    testing::ModelRunner runner(model, 16, 64);
    std::mt19937 rng(11);
    std::vector<int32_t> tokens = {1};
    for (int i = 0; i < 200; ++i) tokens.push_back(static_cast<int32_t>(300 + rng() % 12));
    tokens.push_back(2000);
    tokens.push_back(tokens[1]);
    tokens.push_back(tokens[2]);
    testing::RunSeq seq{tokens, BlockTable(16), 0};
    int64_t chunk = static_cast<int64_t>(tokens.size());
    int named = 0, followed = 0;
    const int steps = 150;
    for (int i = 0; i < steps; ++i) {
      const std::vector<float> logits = runner.step({&seq}, {chunk})[0];
      const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      const int32_t want = copier_next_token(seq.tokens);
      if (want >= 0) {
        ++named;
        followed += next == want;
        EXPECT_EQ(next, want) << GetParam() << ": step " << i;
      }
      seq.tokens.push_back(next);
      chunk = 1;
    }
    EXPECT_EQ(followed, named);
    EXPECT_GE(named, steps * 7 / 10) << "the rule named the next token too seldom for the test to mean much";
    std::printf("%s: the rule named %d of %d next tokens; the model chose them all\n", GetParam().c_str(), named, steps);
  }
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(WeightTypes, CopierTypes, ::testing::Values("F32", "F16", "Q8_0", "Q4_0", "Q4_K_M"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace kvserve
