#include "codecs/tensor_types.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <vector>

#include "codecs/convert.h"
#include "codecs/quantize.h"
#include "codecs/quant_decode.h"

namespace kvserve {
namespace {

void f32_to_float(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }
void f32_from_float(const float* src, void* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }
// The 16-bit float types, each through its scalar conversion.
template <float (*Widen)(uint16_t)>
void u16_to_float(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = Widen(h[i]);
}
template <uint16_t (*Narrow)(float)>
void u16_from_float(const float* src, void* dst, int64_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (int64_t i = 0; i < n; ++i) h[i] = Narrow(src[i]);
}
constexpr auto f16_to_float = u16_to_float<fp16_to_fp32>;
constexpr auto f16_from_float = u16_from_float<fp32_to_fp16>;
constexpr auto bf16_to_float = u16_to_float<bf16_to_fp32>;
constexpr auto bf16_from_float = u16_from_float<fp32_to_bf16>;

// Block layouts (sizes) as ggml-common.h defines them.
constexpr TensorTypeTraits kTypes[] = {
    {TensorType::kF32, "F32", 1, 4, f32_to_float, f32_from_float},
    {TensorType::kF16, "F16", 1, 2, f16_to_float, f16_from_float},
    {TensorType::kQ4_0, "Q4_0", 32, 18, quant::decode_q4_0, quant::encode_q4_0},
    {TensorType::kQ4_1, "Q4_1", 32, 20, quant::decode_q4_1, quant::encode_q4_1},
    {TensorType::kQ5_0, "Q5_0", 32, 22, quant::decode_q5_0, quant::encode_q5_0},
    {TensorType::kQ5_1, "Q5_1", 32, 24, quant::decode_q5_1, quant::encode_q5_1},
    {TensorType::kQ8_0, "Q8_0", 32, 34, quant::decode_q8_0, quant::encode_q8_0},
    {TensorType::kQ8_1, "Q8_1", 32, 36, nullptr, nullptr},
    {TensorType::kQ2_K, "Q2_K", 256, 84, quant::decode_q2_k, quant::encode_q2_k},
    {TensorType::kQ3_K, "Q3_K", 256, 110, quant::decode_q3_k, quant::encode_q3_k},
    {TensorType::kQ4_K, "Q4_K", 256, 144, quant::decode_q4_k, quant::encode_q4_k},
    {TensorType::kQ5_K, "Q5_K", 256, 176, quant::decode_q5_k, quant::encode_q5_k},
    {TensorType::kQ6_K, "Q6_K", 256, 210, quant::decode_q6_k, quant::encode_q6_k},
    {TensorType::kQ8_K, "Q8_K", 256, 292, nullptr, nullptr},
    {TensorType::kIQ2_XXS, "IQ2_XXS", 256, 66, nullptr, nullptr},
    {TensorType::kIQ2_XS, "IQ2_XS", 256, 74, nullptr, nullptr},
    {TensorType::kIQ3_XXS, "IQ3_XXS", 256, 98, nullptr, nullptr},
    {TensorType::kIQ1_S, "IQ1_S", 256, 50, nullptr, nullptr},
    {TensorType::kIQ4_NL, "IQ4_NL", 32, 18, quant::decode_iq4_nl, quant::encode_iq4_nl},
    {TensorType::kIQ3_S, "IQ3_S", 256, 110, nullptr, nullptr},
    {TensorType::kIQ2_S, "IQ2_S", 256, 82, nullptr, nullptr},
    {TensorType::kIQ4_XS, "IQ4_XS", 256, 136, nullptr, nullptr},
    {TensorType::kI8, "I8", 1, 1, nullptr, nullptr},
    {TensorType::kI16, "I16", 1, 2, nullptr, nullptr},
    {TensorType::kI32, "I32", 1, 4, nullptr, nullptr},
    {TensorType::kI64, "I64", 1, 8, nullptr, nullptr},
    {TensorType::kF64, "F64", 1, 8, nullptr, nullptr},
    {TensorType::kIQ1_M, "IQ1_M", 256, 56, nullptr, nullptr},
    {TensorType::kBF16, "BF16", 1, 2, bf16_to_float, bf16_from_float},
    {TensorType::kTQ1_0, "TQ1_0", 256, 54, nullptr, nullptr},
    {TensorType::kTQ2_0, "TQ2_0", 256, 66, nullptr, nullptr},
    {TensorType::kMXFP4, "MXFP4", 32, 17, quant::decode_mxfp4, quant::encode_mxfp4},
};

}  // namespace

const TensorTypeTraits* find_tensor_type(uint32_t id) {
  for (const auto& t : kTypes)
    if (static_cast<uint32_t>(t.type) == id) return &t;
  return nullptr;
}

const TensorTypeTraits& tensor_type(TensorType type) { return *find_tensor_type(static_cast<uint32_t>(type)); }

const char* tensor_type_name(TensorType type) {
  const TensorTypeTraits* t = find_tensor_type(static_cast<uint32_t>(type));
  return t ? t->name : "unknown";
}

std::string tensor_type_label(uint32_t id) {
  const TensorTypeTraits* t = find_tensor_type(id);
  return t ? std::string(t->name) + " (" + std::to_string(id) + ")" : "type " + std::to_string(id);
}

std::string loadable_tensor_types() {
  std::string out;
  for (const auto& t : kTypes)
    if (t.to_float) out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

std::string tensor_type_mix(const std::map<TensorType, int64_t>& bytes) {
  std::vector<std::pair<int64_t, TensorType>> by_size;
  int64_t total = 0;
  for (const auto& [type, n] : bytes) {
    by_size.emplace_back(n, type);
    total += n;
  }
  std::sort(by_size.begin(), by_size.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (const auto& [n, type] : by_size) {
    const double pct = total ? 100.0 * static_cast<double>(n) / static_cast<double>(total) : 0.0;
    out += (out.empty() ? "" : ", ") + std::string(tensor_type_name(type)) + " " +
           (pct < 0.5 ? std::string("<1") : std::to_string(static_cast<int>(pct + 0.5))) + "%";
  }
  return out;
}

int64_t tensor_bytes(TensorType type, int64_t n) {
  const TensorTypeTraits& t = tensor_type(type);
  return n / t.block_size * t.bytes_per_block;
}

}  // namespace kvserve
