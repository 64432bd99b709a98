// Every tensor of every quantized file in ../shared/models/quant decodes to exactly the floats
// of its dequantized twin (written by gguf-py's reference decoder, itself bit-exact with
// libggml's); types this build cannot load are refused naming the tensor and the type.
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "codecs/tensor_types.h"
#include "codecs/convert.h"
#include "kernels/kernel_table.h"
#include "weights/weight_matrix.h"
#include "test_support.h"

namespace kvserve {
namespace {

class QuantTwins : public ::testing::TestWithParam<const char*> {};

TEST_P(QuantTwins, EveryTensorDecodesBitExactlyToItsTwin) {
  const std::string base = testing::shared_model(std::string("quant/") + GetParam());
  KVSERVE_REQUIRE_SHARED_FILE(base + ".gguf");
  GgufFile q(base + ".gguf"), twin(base + ".dequant-f32.gguf");
  int quantized = 0;
  for (const GgufTensorInfo& t : q.tensors()) {
    SCOPED_TRACE(t.name + " " + tensor_type_name(t.type));
    const GgufTensorInfo& ref = twin.tensor(t.name);
    ASSERT_EQ(ref.type, TensorType::kF32);
    ASSERT_EQ(ref.dims, t.dims);
    const TensorTypeTraits& traits = tensor_type(t.type);
    ASSERT_NE(traits.to_float, nullptr);
    std::vector<float> got(t.n_elements());
    traits.to_float(q.tensor_data(t), got.data(), static_cast<int64_t>(got.size()));
    const auto* want = static_cast<const float*>(twin.tensor_data(ref));
    int64_t mismatches = 0, first = -1;
    for (size_t i = 0; i < got.size(); ++i)
      if (std::memcmp(&got[i], &want[i], 4) != 0 && mismatches++ == 0) first = static_cast<int64_t>(i);
    EXPECT_EQ(mismatches, 0) << "first at " << first << ": " << got[first] << " vs " << want[first];
    quantized += traits.block_size > 1;
  }
  EXPECT_GT(quantized, 0);
}

INSTANTIATE_TEST_SUITE_P(Files, QuantTwins,
                         ::testing::Values("stories260K-q8_0", "stories260K-q4_0", "stories260K-mixed",
                                           "synth-kquant-Q2_K", "synth-kquant-Q3_K_M", "synth-kquant-Q4_K_M",
                                           "synth-kquant-Q5_K_M", "synth-kquant-Q6_K", "synth-kquant-Q8_0",
                                           "synth-kquant-Q4_0", "tiny-gpt-oss-mxfp4"));

// Each kernel level's decoders (the matmul kernels' own, vectorized where it pays) give the same
// floats as the twins.
class LevelDecoders : public ::testing::TestWithParam<KernelLevel> {};

TEST_P(LevelDecoders, DecodeEveryQuantizedTensorBitExactly) {
  for (const char* name : {"stories260K-mixed", "synth-kquant-Q2_K", "synth-kquant-Q3_K_M", "synth-kquant-Q4_K_M",
                           "synth-kquant-Q5_K_M", "synth-kquant-Q6_K", "synth-kquant-Q8_0", "synth-kquant-Q4_0",
                           "tiny-gpt-oss-mxfp4"}) {
    const std::string base = testing::shared_model(std::string("quant/") + name);
    KVSERVE_REQUIRE_SHARED_FILE(base + ".gguf");
    GgufFile q(base + ".gguf"), twin(base + ".dequant-f32.gguf");
    for (const GgufTensorInfo& t : q.tensors()) {
      if (t.dims.size() < 2) continue;  // matrices, and stacked experts as their rows
      const int64_t n_in = static_cast<int64_t>(t.dims[0]), rows = static_cast<int64_t>(t.n_elements()) / n_in;
      std::vector<float> got(t.n_elements());
      kernel_table(GetParam()).dequantize_rows(static_cast<uint32_t>(t.type), static_cast<const uint8_t*>(q.tensor_data(t)),
                                               tensor_bytes(t.type, n_in), rows, n_in, got.data());
      EXPECT_EQ(std::memcmp(got.data(), twin.tensor_data(twin.tensor(t.name)), got.size() * 4), 0)
          << name << " " << t.name << " " << tensor_type_name(t.type);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryLevelThisCpuRuns, LevelDecoders, ::testing::ValuesIn(supported_levels()),
                         [](const auto& info) { return std::string(level_name(info.param)); });

// The shared files between them hold every type this build decodes.
TEST(QuantTwins, TheFilesCoverEveryDecodedType) {
  KVSERVE_REQUIRE_SHARED_FILE(testing::shared_model("quant/synth-kquant-Q2_K.gguf"));
  std::vector<bool> seen(64);
  for (const char* name : {"stories260K-mixed", "stories260K-q4_0", "synth-kquant-Q2_K", "synth-kquant-Q3_K_M",
                           "synth-kquant-Q4_K_M", "synth-kquant-Q5_K_M", "synth-kquant-Q6_K", "synth-kquant-Q8_0",
                           "tiny-gpt-oss-mxfp4"}) {
    GgufFile f(testing::shared_model(std::string("quant/") + name + ".gguf"));
    for (const GgufTensorInfo& t : f.tensors()) seen[static_cast<uint32_t>(t.type)] = true;
  }
  for (TensorType t : {TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kQ8_0,
                       TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K,
                       TensorType::kMXFP4})
    EXPECT_TRUE(seen[static_cast<uint32_t>(t)]) << tensor_type_name(t);
}

// MXFP4's encoder on the values llama-quantize's blocks decode to: every such value is a level
// times a power of two, so encoding them again and decoding gives them back bit for bit.
TEST(QuantTypes, Mxfp4ReencodesItsOwnValuesExactly) {
  const std::string path = testing::shared_model("quant/tiny-gpt-oss-mxfp4.gguf");
  KVSERVE_REQUIRE_SHARED_FILE(path);
  GgufFile q(path);
  const TensorTypeTraits& mx = tensor_type(TensorType::kMXFP4);
  int tensors = 0;
  for (const GgufTensorInfo& t : q.tensors()) {
    if (t.type != TensorType::kMXFP4) continue;
    ++tensors;
    const auto n = static_cast<int64_t>(t.n_elements());
    std::vector<float> values(n), again(n);
    mx.to_float(q.tensor_data(t), values.data(), n);
    std::vector<uint8_t> bytes(tensor_bytes(TensorType::kMXFP4, n));
    mx.from_float(values.data(), bytes.data(), n);
    mx.to_float(bytes.data(), again.data(), n);
    EXPECT_EQ(std::memcmp(values.data(), again.data(), n * sizeof(float)), 0) << t.name;
  }
  EXPECT_EQ(tensors, 15);
}

// IQ4_NL (llama-quantize's fallback for Q2_K/Q3_K rows not a multiple of 256; no file in shared/
// holds it) against ggml-common.h's definition written out here: value = F16 scale x the level
// its nibble indexes, low nibbles first. Random blocks, every kernel level's decoder.
TEST(QuantTypes, Iq4NlDecodesToItsLevelTable) {
  static constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> S(-0.05f, 0.05f);
  const int64_t blocks = 64, rows = 2, n_in = blocks / rows * 32;
  std::vector<uint8_t> bytes(blocks * 18);
  std::vector<float> want(blocks * 32);
  for (int64_t b = 0; b < blocks; ++b) {
    uint8_t* blk = bytes.data() + 18 * b;
    const uint16_t d = fp32_to_fp16(S(rng));
    std::memcpy(blk, &d, 2);
    for (int j = 0; j < 16; ++j) {
      blk[2 + j] = static_cast<uint8_t>(rng());
      want[32 * b + j] = fp16_to_fp32(d) * static_cast<float>(kLevels[blk[2 + j] & 15]);
      want[32 * b + 16 + j] = fp16_to_fp32(d) * static_cast<float>(kLevels[blk[2 + j] >> 4]);
    }
  }
  std::vector<float> got(want.size());
  tensor_type(TensorType::kIQ4_NL).to_float(bytes.data(), got.data(), static_cast<int64_t>(got.size()));
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << "the table's decoder";
  for (KernelLevel level : supported_levels()) {
    std::fill(got.begin(), got.end(), 0.0f);
    kernel_table(level).dequantize_rows(static_cast<uint32_t>(TensorType::kIQ4_NL), bytes.data(),
                                        tensor_bytes(TensorType::kIQ4_NL, n_in), rows, n_in, got.data());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << level_name(level);
  }
}

// The IQ4_NL encoder: each block's scale is searched for the least x^2-weighted squared error
// (llama-quantize without an importance matrix), so on Gaussian weights its error is no larger
// than that of the search's first candidate written out here (largest value towards the outermost
// level, each value's nearest level, the least-squares scale of those levels), and its plain squared
// error is below Q4_0's (the same 4.5 bits a value, uniform levels). The stored indices are each
// value's nearest level for the stored scale, bar near-ties from the scale's F16 rounding.
TEST(QuantTypes, Iq4NlEncoderSearchesTheScale) {
  static constexpr int kLevels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  std::mt19937 rng(3);
  std::normal_distribution<float> N(0.0f, 0.02f);
  const int64_t n = 32 * 4096;
  std::vector<float> x(n);
  for (float& v : x) v = N(rng);
  auto nearest = [&](float v, float d) {
    int best = 0;
    for (int k = 1; k < 16; ++k)
      if (std::fabs(v - d * kLevels[k]) < std::fabs(v - d * kLevels[best])) best = k;
    return best;
  };
  // errors[0]: x^2-weighted, errors[1]: plain.
  auto errors = [&](TensorType t, const std::vector<uint8_t>& bytes) {
    std::vector<float> y(n);
    tensor_type(t).to_float(bytes.data(), y.data(), n);
    std::array<double, 2> e{0, 0};
    for (int64_t i = 0; i < n; ++i) {
      const double d2 = (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
      e[0] += double(x[i]) * x[i] * d2, e[1] += d2;
    }
    return e;
  };
  std::vector<uint8_t> iq(tensor_bytes(TensorType::kIQ4_NL, n)), q4(tensor_bytes(TensorType::kQ4_0, n));
  tensor_type(TensorType::kIQ4_NL).from_float(x.data(), iq.data(), n);
  tensor_type(TensorType::kQ4_0).from_float(x.data(), q4.data(), n);
  std::vector<uint8_t> first(iq.size());
  for (int64_t b = 0; b < n / 32; ++b) {
    const float* xb = x.data() + 32 * b;
    float big = 0;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(xb[j]) > std::fabs(big)) big = xb[j];
    int idx[32];
    double qx = 0, q2 = 0;
    for (int j = 0; j < 32; ++j) {
      idx[j] = nearest(xb[j], big / 127.0f);
      const double w = double(xb[j]) * xb[j], q = kLevels[idx[j]];
      qx += w * q * xb[j], q2 += w * q * q;
    }
    const uint16_t h = fp32_to_fp16(static_cast<float>(q2 > 0 ? qx / q2 : 0.0));
    std::memcpy(first.data() + 18 * b, &h, 2);
    for (int j = 0; j < 16; ++j) first[18 * b + 2 + j] = static_cast<uint8_t>(idx[j] | (idx[j + 16] << 4));
  }
  const auto e_iq = errors(TensorType::kIQ4_NL, iq), e_q4 = errors(TensorType::kQ4_0, q4),
             e_first = errors(TensorType::kIQ4_NL, first);
  std::printf("x^2-weighted / plain squared error: IQ4_NL %.4g / %.4g, its first candidate %.4g / %.4g, "
              "Q4_0 %.4g / %.4g\n", e_iq[0], e_iq[1], e_first[0], e_first[1], e_q4[0], e_q4[1]);
  EXPECT_LT(e_iq[0], 0.98 * e_first[0]);
  EXPECT_LT(e_iq[1], 0.9 * e_q4[1]);
  int64_t far = 0;
  for (int64_t b = 0; b < n / 32; ++b) {
    uint16_t h;
    std::memcpy(&h, iq.data() + 18 * b, 2);
    const float d = fp16_to_fp32(h);
    for (int j = 0; j < 32; ++j) {
      const uint8_t byte = iq[18 * b + 2 + j % 16];
      const int got = j < 16 ? byte & 15 : byte >> 4, best = nearest(x[32 * b + j], d);
      const double miss = std::fabs(x[32 * b + j] - d * kLevels[got]) - std::fabs(x[32 * b + j] - d * kLevels[best]);
      if (miss > 1e-3 * std::fabs(d) * 127) ++far;
    }
  }
  EXPECT_EQ(far, 0);
}

// An IQ type (block layout known, no decoder) is refused at load naming tensor and type.
TEST(QuantTypes, UnsupportedTypesAreRefusedByName) {
  const std::string path = std::string(KVSERVE_BINARY_DIR) + "/test-quant-iq4.gguf";
  GgufWriter w(32);
  w.add("general.architecture", GgufValue::str("llama"));
  const TensorTypeTraits& iq = tensor_type(TensorType::kIQ4_XS);
  w.add_tensor("blk.0.attn_q.weight", {256, 2}, TensorType::kIQ4_XS,
               [&](uint8_t* out) { std::memset(out, 0, 2 * iq.bytes_per_block); });
  w.write(path);
  GgufFile f(path);
  try {
    load_float_tensor(f, {"blk.0.attn_q.weight", {256, 2}});
    FAIL() << "loaded an IQ4_XS tensor";
  } catch (const GgufError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("blk.0.attn_q.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("IQ4_XS (23)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Q4_K"), std::string::npos) << msg;  // the list of what loads
  }
}

}  // namespace
}  // namespace kvserve
