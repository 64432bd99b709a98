// stories260K (a real Llama model with GQA) against the public greedy reference outputs of
// llama2.c: 200 and 256 tokens from BOS alone must be reproduced exactly.
#include "gguf/gguf.h"
#include "model/decoder_model.h"
#include "model_runner.h"
#include "test_support.h"
#include "text/tokenizer.h"

namespace kvserve {
namespace {

using testing::read_text;
using testing::shared_model;

TEST(Stories260K, HyperparametersFromGguf) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  GgufFile file(shared_model("stories260K.gguf"));
  auto hp = DecoderHparams::from_gguf(file);
  EXPECT_EQ(hp.n_layer, 5);
  EXPECT_EQ(hp.n_embd, 64);
  EXPECT_EQ(hp.n_head, 8);
  EXPECT_EQ(hp.n_head_kv, 4);
  EXPECT_EQ(hp.head_dim, 8);
  EXPECT_EQ(hp.n_ff, 172);
  EXPECT_EQ(hp.n_vocab, 512);
  EXPECT_EQ(hp.rope_dim, 8);
  EXPECT_FLOAT_EQ(hp.rope_base, 10000.0f);
  EXPECT_EQ(DecoderModel(file).kv_shape().bytes_per_token(), 2 * 5 * 4 * 8 * 4);
}

class StoriesGreedy : public ::testing::TestWithParam<int> {};

TEST_P(StoriesGreedy, ReproducesLlama2cOutput) {
  const int n = GetParam();
  const std::string expected_file = n == 200 ? "stories260K.expected.txt" : "stories260K.expected.n256.txt";
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  GgufFile file(shared_model("stories260K.gguf"));
  DecoderModel model(file);
  Tokenizer tok(file);
  // Small blocks in shuffled order: the sequence spans many non-contiguous blocks.
  testing::ModelRunner runner(model, 16, 64, /*shuffle_seed=*/7);
  auto prompt = tok.encode("", true);
  ASSERT_EQ(prompt, std::vector<int32_t>{1});
  auto out = runner.greedy(prompt, n);
  EXPECT_EQ(tok.decode(out), read_text(shared_model(expected_file)));

  std::istringstream ids(read_text(shared_model("stories260K.expected.tokens.txt")));
  std::vector<int32_t> expected;
  int32_t id;
  while (ids >> id) expected.push_back(id);
  ASSERT_GE(expected.size(), static_cast<size_t>(n) + 1);
  EXPECT_EQ(out, std::vector<int32_t>(expected.begin() + 1, expected.begin() + 1 + n));
  EXPECT_EQ(runner.allocator().num_free(), 64);
}

INSTANTIATE_TEST_SUITE_P(Lengths, StoriesGreedy, ::testing::Values(200, 256));

}  // namespace
}  // namespace kvserve
