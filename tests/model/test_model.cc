// The model against an independent float64 implementation (token for token, logits within
// tolerance), and the batching invariant: any batch composition gives each sequence the logits
// it gets alone.
#include <cstdio>
#include <filesystem>

#include "gguf/gguf.h"
#include "model/decoder_model.h"
#include "model/synthetic.h"
#include "model_runner.h"
#include "reference_decoder.h"
#include "test_support.h"
#include "text/tokenizer.h"

namespace kvserve {
namespace {

using testing::ModelRunner;
using testing::ReferenceDecoder;
using testing::RunSeq;
using testing::shared_model;

std::string temp_model(const SyntheticSpec& spec, const std::string& tag) {
  std::string path = std::string(KVSERVE_BINARY_DIR) + "/test-model-" + tag + ".gguf";
  write_synthetic_model(spec, path);
  return path;
}

int argmax(const std::vector<float>& v) {
  return static_cast<int>(std::max_element(v.begin(), v.end()) - v.begin());
}

// Greedy from `prompt` with both implementations, comparing logits at every step.
void expect_matches_reference(const std::string& path, const std::vector<int32_t>& prompt, int n_new,
                              double tol, bool keep_bf16 = false) {
  GgufFile file(path);
  DecoderModel model(file, WeightPolicy{.keep_bf16 = keep_bf16});
  // Weights held in BF16 (CPUs that multiply BF16 natively) round each product's input to BF16:
  // the reference does the same, and the tolerance allows for F32 against float64 accumulation
  // moving an input across a BF16 rounding boundary now and then.
  const bool bf16 = model.hparams().held_as == TensorType::kBF16;
  ReferenceDecoder ref(file, bf16);
  if (bf16) tol = std::max(tol, 1e-3);
  ModelRunner runner(model, 8, 64, 3);
  RunSeq s{prompt, BlockTable(8), 0};
  int64_t chunk = static_cast<int64_t>(prompt.size());
  for (int i = 0; i < n_new; ++i) {
    auto ours = runner.step({&s}, {chunk})[0];
    auto theirs = ref.last_logits(s.tokens);
    double max_abs = 0, max_err = 0;
    for (size_t j = 0; j < ours.size(); ++j) {
      max_abs = std::max(max_abs, std::abs(theirs[j]));
      max_err = std::max(max_err, std::abs(ours[j] - theirs[j]));
    }
    ASSERT_LE(max_err, tol * std::max(1.0, max_abs)) << "step " << i;
    const int ref_next = static_cast<int>(std::max_element(theirs.begin(), theirs.end()) - theirs.begin());
    ASSERT_EQ(argmax(ours), ref_next) << "step " << i;
    s.tokens.push_back(ref_next);
    chunk = 1;
  }
}

TEST(ModelVsReference, Stories260KOtherPrompts) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  GgufFile file(shared_model("stories260K.gguf"));
  Tokenizer tok(file);
  for (const char* p : {"Once upon a time", "The little dog wanted to", "Tom and Lily went to the park. They"})
    expect_matches_reference(shared_model("stories260K.gguf"), tok.encode(p, true), 24, 1e-4);
}

TEST(ModelVsReference, SyntheticShapes) {
  SyntheticSpec mha{.dim = 64, .layers = 2, .heads = 4, .kv_heads = 4, .ffn = 96, .vocab = 300};
  expect_matches_reference(temp_model(mha, "ref-mha"), {1, 40, 41, 42, 300 - 1}, 12, 1e-4);
  SyntheticSpec mqa{.dim = 64, .layers = 2, .heads = 8, .kv_heads = 1, .ffn = 64, .vocab = 320, .seed = 5};
  expect_matches_reference(temp_model(mqa, "ref-mqa"), {1, 7, 8, 9}, 12, 1e-4);
  SyntheticSpec f16{.dim = 32, .layers = 2, .heads = 4, .kv_heads = 2, .ffn = 48, .vocab = 280,
                    .dtype = TensorType::kF16, .seed = 9, .tied_output = true};
  expect_matches_reference(temp_model(f16, "ref-f16"), {1, 100, 200}, 12, 1e-4);
  SyntheticSpec bf16{.dim = 32, .layers = 1, .heads = 2, .kv_heads = 1, .ffn = 32, .vocab = 270,
                     .dtype = TensorType::kBF16, .seed = 11};
  expect_matches_reference(temp_model(bf16, "ref-bf16"), {1, 3, 4}, 8, 1e-4);
  // Kept as BF16 (where the CPU multiplies BF16 natively; elsewhere this is the F32 path again).
  expect_matches_reference(temp_model(bf16, "ref-bf16"), {1, 3, 4}, 8, 1e-4, /*keep_bf16=*/true);
  // Tied: the embedding looked up as BF16 rows, the output built from the same values.
  SyntheticSpec bf16_tied = bf16;
  bf16_tied.tied_output = true;
  expect_matches_reference(temp_model(bf16_tied, "ref-bf16-tied"), {1, 3, 4}, 8, 1e-4);
  expect_matches_reference(temp_model(bf16_tied, "ref-bf16-tied"), {1, 3, 4}, 8, 1e-4, /*keep_bf16=*/true);
  std::printf("BF16 weights with model.keep_bf16 held as %s\n",
              tensor_type_name(DecoderModel(GgufFile(temp_model(bf16, "ref-bf16")), WeightPolicy{.keep_bf16 = true}).hparams().held_as));
}

// Runs each sequence alone, then all of them together with staggered starts, chunked prompts
// and decodes in the same steps; logits must agree at every position.
void expect_batched_equals_sequential(const std::string& path, int block_size) {
  GgufFile file(path);
  DecoderModel model(file);
  const int V = model.hparams().n_vocab;
  std::vector<std::vector<int32_t>> prompts;
  for (int s = 0; s < 6; ++s) {
    std::vector<int32_t> p = {1};
    for (int i = 0; i < 3 + 5 * s; ++i) p.push_back(3 + (s * 37 + i * 11) % (V - 3));
    prompts.push_back(p);
  }
  const int n_new = 10;
  std::vector<std::vector<int32_t>> full;
  std::vector<std::vector<std::vector<float>>> alone;  // [seq][step] logits
  {
    ModelRunner runner(model, block_size, 256);
    for (const auto& p : prompts) {
      RunSeq s{p, BlockTable(block_size), 0};
      std::vector<std::vector<float>> steps;
      int64_t chunk = static_cast<int64_t>(p.size());
      for (int i = 0; i < n_new; ++i) {
        steps.push_back(runner.step({&s}, {chunk})[0]);
        s.tokens.push_back(argmax(steps.back()));
        chunk = 1;
      }
      s.tokens.pop_back();  // the last sampled token is never fed
      full.push_back(s.tokens);
      alone.push_back(std::move(steps));
      s.table.release_all(runner.allocator());
    }
  }
  ModelRunner runner(model, block_size, 256, /*shuffle_seed=*/11);
  std::vector<RunSeq> seqs;
  for (const auto& t : full) seqs.push_back(RunSeq{t, BlockTable(block_size), 0});
  for (int step = 0;; ++step) {
    std::vector<RunSeq*> batch;
    std::vector<int64_t> chunks;
    std::vector<size_t> ids;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int64_t plen = static_cast<int64_t>(prompts[s].size());
      const int64_t total = static_cast<int64_t>(full[s].size());
      if (static_cast<int>(s) > step || seqs[s].computed >= total) continue;
      batch.push_back(&seqs[s]);
      chunks.push_back(seqs[s].computed < plen ? std::min<int64_t>(4, plen - seqs[s].computed) : 1);
      ids.push_back(s);
    }
    if (batch.empty()) break;
    auto logits = runner.step(batch, chunks);
    for (size_t i = 0; i < ids.size(); ++i) {
      const size_t s = ids[i];
      const int64_t plen = static_cast<int64_t>(prompts[s].size());
      if (seqs[s].computed < plen) continue;  // mid-prompt: nothing to compare yet
      const auto& expect = alone[s][seqs[s].computed - plen];
      for (int j = 0; j < V; ++j)
        ASSERT_NEAR(logits[i][j], expect[j], 1e-4 * std::max(1.0f, std::abs(expect[j])))
            << "seq " << s << " position " << seqs[s].computed;
    }
  }
}

TEST(BatchedEqualsSequential, Stories260K) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  expect_batched_equals_sequential(shared_model("stories260K.gguf"), 4);
}

TEST(BatchedEqualsSequential, SyntheticMha) {
  SyntheticSpec spec{.dim = 96, .layers = 2, .heads = 6, .kv_heads = 6, .ffn = 128, .vocab = 400};
  expect_batched_equals_sequential(temp_model(spec, "batch-mha"), 16);
}

TEST(Synthetic, MkmodelOutputRunsAndIsDeterministic) {
  SyntheticSpec spec{.dim = 48, .layers = 2, .heads = 4, .kv_heads = 2, .ffn = 64, .vocab = 300, .seed = 3};
  const std::string a = temp_model(spec, "det-a"), b = temp_model(spec, "det-b");
  EXPECT_EQ(testing::read_text(a), testing::read_text(b));
  GgufFile file(a);
  DecoderModel model(file);
  Tokenizer tok(file);
  EXPECT_EQ(model.hparams().n_head_kv, 2);
  ModelRunner runner(model, 16, 16);
  auto out = runner.greedy(tok.encode("hello", true), 8);
  EXPECT_EQ(out.size(), 8u);
  for (int32_t id : out) EXPECT_LT(id, 300);
  EXPECT_EQ(tok.decode(tok.encode("any text, ünïcode too", true)), "any text, ünïcode too");
}

}  // namespace
}  // namespace kvserve
