// One activation row rounded per block of 32 for the 32-value types' kernels
// (kernels/int8/types32.h), written on the vector layer (kernels/vec/vec_int8.h). Included
// inside a kernel level's target region, after vec_int8.h, where the level has the layer.
#pragma once

#include <cstdint>

#include "kernels/int8/types32.h"

#if KVSERVE_HAS_VEC_INT8
namespace kvserve::KVSERVE_KERNEL_NS::int8 {

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
