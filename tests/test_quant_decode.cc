// Every tensor of every quantized file in ../shared/models/quant decodes to exactly the floats
// of its dequantized twin (written by gguf-py's reference decoder, itself bit-exact with
// libggml's); types this build cannot load are refused naming the tensor and the type.
#include <cstring>
#include <vector>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "gguf/tensor_types.h"
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
                                           "synth-kquant-Q4_0"));

// Each kernel level's decoders (the matmul kernels' own, vectorized where it pays) give the same
// floats as the twins.
class LevelDecoders : public ::testing::TestWithParam<KernelLevel> {};

TEST_P(LevelDecoders, DecodeEveryQuantizedTensorBitExactly) {
  for (const char* name : {"stories260K-mixed", "synth-kquant-Q2_K", "synth-kquant-Q3_K_M", "synth-kquant-Q4_K_M",
                           "synth-kquant-Q5_K_M", "synth-kquant-Q6_K", "synth-kquant-Q8_0", "synth-kquant-Q4_0"}) {
    const std::string base = testing::shared_model(std::string("quant/") + name);
    KVSERVE_REQUIRE_SHARED_FILE(base + ".gguf");
    GgufFile q(base + ".gguf"), twin(base + ".dequant-f32.gguf");
    for (const GgufTensorInfo& t : q.tensors()) {
      if (t.dims.size() != 2) continue;
      const int64_t rows = static_cast<int64_t>(t.dims[1]), n_in = static_cast<int64_t>(t.dims[0]);
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
                           "synth-kquant-Q4_K_M", "synth-kquant-Q5_K_M", "synth-kquant-Q6_K", "synth-kquant-Q8_0"}) {
    GgufFile f(testing::shared_model(std::string("quant/") + name + ".gguf"));
    for (const GgufTensorInfo& t : f.tensors()) seen[static_cast<uint32_t>(t.type)] = true;
  }
  for (TensorType t : {TensorType::kQ4_0, TensorType::kQ4_1, TensorType::kQ5_0, TensorType::kQ5_1, TensorType::kQ8_0,
                       TensorType::kQ2_K, TensorType::kQ3_K, TensorType::kQ4_K, TensorType::kQ5_K, TensorType::kQ6_K})
    EXPECT_TRUE(seen[static_cast<uint32_t>(t)]) << tensor_type_name(t);
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
