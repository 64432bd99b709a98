// The 32-value block types on the integer path (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL) as the
// kernels see them at every level, and one activation row rounded per block of 32, written on
// the vector layer (kernels/vec/vec_int8.h). Included inside a kernel level's target region,
// after vec_int8.h, where the level has the layer.
#pragma once

#include <cstdint>

#include "codecs/quant_blocks.h"
#include "codecs/tensor_types.h"

#if KVSERVE_HAS_VEC_INT8
namespace kvserve::KVSERVE_KERNEL_NS::int8 {

// A type's block, the offset added to its levels to make them unsigned (vec::levels), whether
// the block has a minimum after its scale (value = d·q + m; then the offset is 0), and the bits
// a packed panel keeps of each level (8, 5 or 4; IQ4_NL keeps its 4-bit indices and looks them
// up as it reads: `lookup`).
template <typename B, int32_t kOffset, bool kHasMin, int kBits, bool kLookup = false>
struct Type32 {
  using Block = B;
  static constexpr int32_t offset = kOffset;
  static constexpr bool has_min = kHasMin;
  static constexpr int bits = kBits;
  static constexpr bool lookup = kLookup;
  // Levels above 127 (vec::dot's kWide).
  static constexpr bool wide = kOffset == 128;
};
using TypeQ8_0 = Type32<quant::BlockQ8_0, 128, false, 8>;
using TypeQ4_0 = Type32<quant::BlockQ4_0, 8, false, 4>;
using TypeQ5_0 = Type32<quant::BlockQ5_0, 16, false, 5>;
using TypeQ4_1 = Type32<quant::BlockQ4_1, 0, true, 4>;
using TypeQ5_1 = Type32<quant::BlockQ5_1, 0, true, 5>;
using TypeIQ4_NL = Type32<quant::BlockIQ4_NL, 128, false, 4, true>;

// Calls f(T{}) with the type of `type` (a TensorType id); false if it is not one of them.
template <class F>
inline bool with_type32(uint32_t type, F&& f) {
  switch (static_cast<TensorType>(type)) {
    case TensorType::kQ8_0: f(TypeQ8_0{}); return true;
    case TensorType::kQ4_0: f(TypeQ4_0{}); return true;
    case TensorType::kQ5_0: f(TypeQ5_0{}); return true;
    case TensorType::kQ4_1: f(TypeQ4_1{}); return true;
    case TensorType::kQ5_1: f(TypeQ5_1{}); return true;
    case TensorType::kIQ4_NL: f(TypeIQ4_NL{}); return true;
    default: return false;
  }
}

// One activation row rounded per block of 32, with the sums the types' offsets and minimums
// need.
struct Row32 {
  const int8_t* q;        // [n_in] levels
  const float* d;         // [n_in / 32] block scales
  const int32_t* lanes;   // [n_in / 4] sums of each 4 levels (one vec::dot lane)
  const int32_t* sum;     // [n_in / 32] sums of each block's levels
};

// Scratch bytes of one rounded row (a multiple of 64).
inline int64_t row32_bytes(int64_t n_in) { return (2 * n_in + n_in / 4 + 63) / 64 * 64; }

// x: [n_in] into scratch (row32_bytes(n_in) bytes, 64-byte aligned).
inline Row32 round_row32(const float* x, int64_t n_in, uint8_t* scratch) {
  auto* q = reinterpret_cast<int8_t*>(scratch);
  auto* lanes = reinterpret_cast<int32_t*>(scratch + n_in);
  auto* d = reinterpret_cast<float*>(lanes + n_in / 4);
  auto* sum = reinterpret_cast<int32_t*>(d + n_in / 32);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    d[b] = vec::round_block32(x + 32 * b, q + 32 * b);
    sum[b] = vec::block_lanes(q + 32 * b, lanes + 8 * b);
  }
  return {q, d, lanes, sum};
}

}  // namespace kvserve::KVSERVE_KERNEL_NS::int8
#endif
