// Teacher-forced log-probabilities of ../shared/models/reference-text.txt against llama.cpp's
// (reference-logprobs.json: llama.cpp b4747, F32 KV cache), model by model: the F32 files and
// the dequantized twins within 0.002 nats/token of llama.cpp on the same file, each quantized
// file within 0.05 of what llama.cpp computes on its twin (exact arithmetic on the same
// weights; llama.cpp's own 8-bit activations are 0.015-0.032 away) with means within 0.01.
// The prompt runs as a prefill chunk (the GEMM path) followed by one token a step (the
// small-batch path), through an F32 KV cache as the reference used.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "gguf/quant_presets.h"
#include "kernels/kernel_table.h"
#include "model/model.h"
#include "model/synthetic.h"
#include "text/tokenizer.h"
#include "logprob_reference.h"
#include "test_support.h"

namespace kvserve {
namespace {

class QuantFiles : public ::testing::TestWithParam<std::tuple<const char*, KernelLevel>> {};

TEST_P(QuantFiles, AgreeWithLlamaCppOnTheDequantizedTwin) {
  const std::string base = std::string("quant/") + std::get<0>(GetParam());
  KVSERVE_REQUIRE_SHARED_FILE(testing::shared_model(base + ".gguf"));
  // As served (activations rounded to 8 bits where the integer path runs) within the bound,
  // and with float activations the twin's exact arithmetic.
  const Compare q = compare(base + ".gguf", base + ".dequant-f32.gguf", std::get<1>(GetParam()));
  EXPECT_LE(q.mean_abs, 0.05);
  EXPECT_LE(std::fabs(q.mean_ours - q.mean_ref), 0.01);
  const Compare e = compare(base + ".gguf", base + ".dequant-f32.gguf", std::get<1>(GetParam()), false);
  EXPECT_LE(e.mean_abs, 0.002);
  // The twin itself, F32 as llama.cpp ran it.
  const Compare t = compare(base + ".dequant-f32.gguf", base + ".dequant-f32.gguf", std::get<1>(GetParam()));
  EXPECT_LE(t.mean_abs, 0.002);
  std::printf("%s: vs llama.cpp on the twin %.6f nats/token (means %.5f / %.5f), float activations %.6f; twin %.6f\n",
              base.c_str(), q.mean_abs, q.mean_ours, q.mean_ref, e.mean_abs, t.mean_abs);
}

INSTANTIATE_TEST_SUITE_P(
    Files, QuantFiles,
    ::testing::Combine(::testing::Values("stories260K-q8_0", "stories260K-q4_0", "stories260K-mixed",
                                         "synth-kquant-Q2_K", "synth-kquant-Q3_K_M", "synth-kquant-Q4_K_M",
                                         "synth-kquant-Q5_K_M", "synth-kquant-Q6_K", "synth-kquant-Q8_0",
                                         "synth-kquant-Q4_0"),
                       ::testing::ValuesIn(supported_levels())));

TEST(F32Files, AgreeWithLlamaCpp) {
  KVSERVE_REQUIRE_SHARED_FILE(testing::shared_model("quant/synth-kquant-f32.gguf"));
  const Compare c = compare("quant/synth-kquant-f32.gguf", "quant/synth-kquant-f32.gguf", best_supported_level());
  EXPECT_LE(c.mean_abs, 0.002);
}

// The file's per-token log-probabilities with its matrices in the file's layout (lp[0]) and as
// packed panels (lp[1]), each model's hparams in hp; false if this CPU packs no `probe` panels.
bool by_layout(const GgufFile& f, const std::vector<int32_t>& tokens, int64_t prefill, TensorType probe,
               std::vector<double> (&lp)[2], ModelHparams (&hp)[2]) {
  if (!plan_packs(kernel_table(best_supported_level()), static_cast<uint32_t>(probe), 256, 16)) return false;
  for (bool repack : {false, true}) {
    ModelLoadOptions opt;
    opt.weights.repack = repack;
    auto model = load_model(f, opt);
    hp[repack] = model->hparams();
    lp[repack] = teacher_forced(*model, tokens, prefill);
  }
  return true;
}

// Packed panels (model.repack_weights) against the file's layout on the same file and level:
// the same products with float sums in another order. An activation that lands within rounding
// of half a level may then round the other way to 8 bits downstream, so a few tokens move by up
// to the quantization's own noise; the mean stays within a tenth of the llama.cpp bound.
TEST(PackedPanels, SameLogProbabilitiesAsTheFileLayout) {
  for (const char* name : {"synth-kquant-Q4_K_M", "synth-kquant-Q5_K_M", "synth-kquant-Q4_0", "stories260K-mixed"}) {
    const std::string path = testing::shared_model(std::string("quant/") + name + ".gguf");
    KVSERVE_REQUIRE_SHARED_FILE(path);
    const std::vector<int32_t> tokens =
        references()["models"][std::string("quant/") + name + ".dequant-f32.gguf"]["visible1"]["token_ids"]
            .get<std::vector<int32_t>>();
    GgufFile f(path);
    std::vector<double> lp[2];
    ModelHparams hp[2];
    if (!by_layout(f, tokens, static_cast<int64_t>(tokens.size()) / 2, TensorType::kQ8_0, lp, hp))
      GTEST_SKIP() << "this CPU packs no panels (no AVX-512 VNNI)";
    // stories260K's FFN (172 wide) and tied output keep the file's layout; its attention is
    // packed (16% of its bytes; of the synthetic files, all but the token embedding).
    EXPECT_GT(hp[1].panel_bytes, hp[1].weight_bytes / 8) << name;
    EXPECT_EQ(hp[0].panel_bytes, 0) << name;
    ASSERT_EQ(lp[0].size(), lp[1].size());
    double worst = 0, mean = 0;
    for (size_t i = 0; i < lp[0].size(); ++i) {
      worst = std::max(worst, std::fabs(lp[0][i] - lp[1][i]));
      mean += std::fabs(lp[0][i] - lp[1][i]) / static_cast<double>(lp[0].size());
    }
    std::printf("%s: panels vs file layout, mean |difference| %.2e, largest %.2e nats\n", name, mean, worst);
    EXPECT_LE(mean, 0.005) << name;
    EXPECT_GT(lp[0].size(), 100u);
  }
}

// F16 weights held as packed panels (kernels/f16_panels.cc) against the file's rows, over a
// 100-token prompt (the GEMM on panels decoded back to rows) and then one token a step: the
// same float products, summed in another order.
TEST(PackedPanels, F16ModelSameAsTheRowLayout) {
  SyntheticSpec spec;
  spec.dim = 256, spec.ffn = 512, spec.heads = 4, spec.kv_heads = 2, spec.layers = 2, spec.vocab = 512;
  const std::string path = std::string(KVSERVE_BINARY_DIR) + "/test-f16-panels.gguf";
  write_synthetic_model(spec, path, "f16");
  std::mt19937 rng(11);
  std::vector<int32_t> tokens{1};
  for (int i = 0; i < 150; ++i) tokens.push_back(3 + static_cast<int32_t>(rng() % 500));
  GgufFile f(path);
  std::vector<double> lp[2];
  ModelHparams hp[2];
  if (!by_layout(f, tokens, 100, TensorType::kF16, lp, hp)) GTEST_SKIP() << "this CPU packs no F16 panels (no AVX-512)";
  EXPECT_EQ(hp[0].panel_bytes, 0);
  EXPECT_GT(hp[1].panel_bytes, hp[1].weight_bytes / 2);
  ASSERT_EQ(lp[0].size(), lp[1].size());
  double worst = 0;
  for (size_t i = 0; i < lp[0].size(); ++i) worst = std::max(worst, std::fabs(lp[0][i] - lp[1][i]));
  std::printf("F16 panels vs rows: largest difference %.2e nats\n", worst);
  EXPECT_LE(worst, 1e-4);
  EXPECT_GT(lp[0].size(), 100u);
}

// A q8_0 KV cache (34/32 bytes a value) against an f16 one on stories260K, in prefill chunks and
// one token a step: each token's log-probability within 0.02 nats on average, on the reference
// text and on a text of our own. The cache rounds K less the model's anchor (BOS's K at position
// 0): without it, 0.037 and 0.043 (docs/kv_cache.md).
TEST(KvCacheTypes, Q8CloseToF16) {
  KVSERVE_REQUIRE_SHARED_FILE(testing::shared_model("stories260K.gguf"));
  GgufFile f(testing::shared_model("stories260K.gguf"));
  Tokenizer tok(f);
  const std::vector<std::vector<int32_t>> texts = {
      references()["models"]["quant/stories260K-q8_0.dequant-f32.gguf"]["visible1"]["token_ids"].get<std::vector<int32_t>>(),
      tok.encode("Once upon a time, a little fox found a shiny stone by the river. She showed it to her friend the "
                 "owl, who said it was magic. They went home happy and slept.",
                 true)};
  auto model = load_model(f, {});
  for (const std::vector<int32_t>& tokens : texts) {
    const std::vector<double> f16 = teacher_forced(*model, tokens, 40, 2), q8 = teacher_forced(*model, tokens, 40, 1);
    ASSERT_EQ(f16.size(), q8.size());
    double sum = 0, diff = 0;
    for (size_t i = 0; i < f16.size(); ++i) {
      sum += std::fabs(f16[i] - q8[i]);
      diff += q8[i] - f16[i];
    }
    const std::vector<double> f32 = teacher_forced(*model, tokens, 40, 4);
    double f16_vs_f32 = 0;
    for (size_t i = 0; i < f16.size(); ++i) f16_vs_f32 += std::fabs(f16[i] - f32[i]);
    std::printf("%zu tokens: q8_0 KV vs f16 KV: mean |difference| %.5f, difference of means %.5f nats/token (f16 vs "
                "f32: %.5f)\n",
                tokens.size(), sum / f16.size(), diff / f16.size(), f16_vs_f32 / f16.size());
    EXPECT_LE(sum / f16.size(), 0.02);
    EXPECT_LE(std::fabs(diff / f16.size()), 0.01);
    EXPECT_GT(sum, 0.0);  // the q8_0 path really ran
  }
}

// llama-quantize's fallbacks where a row is not a multiple of 256 (Qwen2-0.5B's 896, say): Q2_K
// and Q3_K rows become IQ4_NL, Q4_K Q5_0, Q5_K Q5_1, Q6_K Q8_0, and the output Q8_0. On a
// 128-wide model (FFN 384) every matrix falls back. The IQ4_NL file then runs on every level,
// and its log-probabilities are nearer the F32 original's than the Q4_0 file's (the same 4.5
// bits a weight, uniform levels).
TEST(QuantizerFallbacks, RowsNotAMultipleOf256) {
  using T = TensorType;
  SyntheticSpec spec;
  spec.dim = 128, spec.ffn = 384, spec.heads = 4, spec.kv_heads = 4, spec.layers = 2, spec.vocab = 512;
  const std::string dir = std::string(KVSERVE_BINARY_DIR) + "/test-fallback-";
  write_synthetic_model(spec, dir + "f32.gguf");
  const std::vector<std::pair<const char*, std::vector<T>>> allowed = {
      {"Q2_K", {T::kIQ4_NL}}, {"Q3_K_M", {T::kIQ4_NL, T::kQ5_0, T::kQ5_1}}, {"Q4_K_M", {T::kQ5_0, T::kQ8_0}},
      {"Q5_K_M", {T::kQ5_1, T::kQ8_0}}, {"Q6_K", {T::kQ8_0}}, {"Q4_0", {T::kQ4_0}}};
  for (const auto& [preset, types] : allowed) {
    write_synthetic_model(spec, dir + preset + ".gguf", preset);
    GgufFile f(dir + preset + ".gguf");
    std::vector<bool> seen(types.size());
    for (const GgufTensorInfo& t : f.tensors()) {
      if (t.dims.size() != 2) continue;
      if (t.name == "output.weight") {
        EXPECT_EQ(t.type, T::kQ8_0) << preset;
        continue;
      }
      const auto at = std::find(types.begin(), types.end(), t.type);
      EXPECT_NE(at, types.end()) << preset << " " << t.name << " " << tensor_type_name(t.type);
      if (at != types.end()) seen[at - types.begin()] = true;
    }
    for (size_t i = 0; i < types.size(); ++i) EXPECT_TRUE(seen[i]) << preset << " wrote no " << tensor_type_name(types[i]);
  }
  std::mt19937 rng(9);
  std::vector<int32_t> tokens(96);
  for (int32_t& t : tokens) t = 3 + static_cast<int32_t>(rng() % 509);
  auto logprobs = [&](const std::string& name, KernelLevel level) {
    GgufFile f(dir + name + ".gguf");
    ModelLoadOptions opt;
    opt.kernels = &kernel_table(level);
    opt.weights.int8_activations = true;
    auto model = load_model(f, opt);
    return teacher_forced(*model, tokens, 48);
  };
  auto distance = [](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += std::fabs(a[i] - b[i]);
    return s / static_cast<double>(a.size());
  };
  for (KernelLevel level : supported_levels()) {
    const std::vector<double> f32 = logprobs("f32", level);
    const double iq4 = distance(logprobs("Q2_K", level), f32), q4 = distance(logprobs("Q4_0", level), f32);
    std::printf("%s: from the F32 original, IQ4_NL %.5f, Q4_0 %.5f nats/token\n", level_name(level), iq4, q4);
    EXPECT_LT(iq4, q4) << level_name(level);
    EXPECT_GT(iq4, 0.0) << level_name(level);
  }
}

// kvserve-quantize against llama-quantize on the same F32 model: the same type for every tensor,
// and log-probabilities no further from the original's than 1.1x llama.cpp's own distance
// (README section 5 of ../shared/models).
struct PresetCase {
  const char* preset;
  double llama_cpp_distance;  // mean |Δ log p| of llama-quantize's file against the F32 original
};
class Quantizer : public ::testing::TestWithParam<PresetCase> {};

TEST_P(Quantizer, ChoosesLlamaQuantizeTypesAndIsAsAccurate) {
  const PresetCase& c = GetParam();
  const std::string original = testing::shared_model("quant/synth-kquant-f32.gguf");
  const std::string theirs = testing::shared_model(std::string("quant/synth-kquant-") + c.preset + ".gguf");
  KVSERVE_REQUIRE_SHARED_FILE(theirs);
  const std::string ours = std::string(KVSERVE_BINARY_DIR) + "/test-quantizer-" + c.preset + ".gguf";
  {
    GgufFile f(original);
    quantize_file(f, ours, *find_quant_preset(c.preset));
  }
  GgufFile mine(ours), ref(theirs);
  for (const GgufTensorInfo& t : ref.tensors())
    EXPECT_EQ(tensor_type_name(mine.tensor(t.name).type), std::string(tensor_type_name(t.type))) << t.name;
  const Compare q = compare_path(ours, "quant/synth-kquant-f32.gguf", best_supported_level());
  std::printf("%s: ours %.4f nats/token from the original, llama-quantize %.4f (ratio %.2f)\n", c.preset, q.mean_abs,
              c.llama_cpp_distance, q.mean_abs / c.llama_cpp_distance);
  EXPECT_LE(q.mean_abs, 1.1 * c.llama_cpp_distance);
}

INSTANTIATE_TEST_SUITE_P(Presets, Quantizer,
                         ::testing::Values(PresetCase{"Q8_0", 0.033}, PresetCase{"Q6_K", 0.085},
                                           PresetCase{"Q5_K_M", 0.159}, PresetCase{"Q4_K_M", 0.239},
                                           PresetCase{"Q4_0", 0.307}, PresetCase{"Q3_K_M", 0.606},
                                           PresetCase{"Q2_K", 1.064}),
                         [](const auto& info) { return std::string(info.param.preset); });

}  // namespace
}  // namespace kvserve
