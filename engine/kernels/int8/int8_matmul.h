// The integer path of the quantized matmul: activations rounded to 8 bits per block (32 values
// with one F16 scale for the 32-value types, as llama.cpp's Q8_0 activations; 256 for the K
// types, as its Q8_K), multiplied with the weights' integer levels by AVX-512 VNNI, the scales
// applied in float per block. For Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4 and Q2_K..Q6_K
// weights at every batch height: decoding to float costs more than streaming the weights at
// decode sizes, and the panel GEMMs beat float FMAs at prompt sizes.
#pragma once

#include <cmath>
#include <cstdint>

#include "codecs/convert.h"
#include "codecs/tensor_types.h"
#include "kernels/kernel_level.h"
#include "kernels/matmul_plan.h"
#include "kernels/quant_matmul.h"

namespace kvserve {

// One block of n activations as the integer path rounds them (the scalar definition the tests
// multiply with): d = max |x| / 127, q = round-half-even(x / d). x: [n]; q: [n]. Returns the
// scale the products use: for blocks of 32 d rounded to F16, as llama.cpp's Q8_0 activations
// keep it (q is rounded with the exact d; its Q8_K blocks of 256 keep a float).
inline float round_activations(const float* x, int8_t* q, int n = 32) {
  float amax = 0.0f;
  for (int i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
  return n == 32 ? fp16_to_fp32(fp32_to_fp16(d)) : d;
}

// The activations' block on the integer path: 256 for the K types (as llama.cpp's Q8_K, so a
// super-block's integer products meet one float scale), 32 for the others (as its Q8_0).
inline int activation_block(uint32_t type) { return tensor_type(static_cast<TensorType>(type)).block_size == 256 ? 256 : 32; }

// Scratch bytes the integer path needs for m rows of n_in activations.
inline int64_t int8_scratch_bytes(int64_t m, int64_t n_in) { return m * n_in * 3 + 256; }

}  // namespace kvserve

#ifdef KVSERVE_KERNEL_NS
#include "kernels/int8/k_types.h"
#include "kernels/int8/types32.h"

namespace kvserve::KVSERVE_KERNEL_NS {

// The integer kernels of one type, each taking what plan_matmul (kernels/matmul_plan.h) gives
// it, at most kSmallBatchRows activation rows (a.scratch: int8_scratch_bytes(a.m, a.n_in)
// bytes). A level's table (kernels/matmul_types.cc) points each type's row at those the level
// has (MatmulTypeRow::int8_kernels); the kernels never look a type up.
// 32-value types, T one of int8/types32.h's: q32_fused for 1-4 rows (and every height where the
// level has no GEMM), nothing staged in memory between reading a weight and multiplying it
// (kernels/int8/q32_fused.cc); q32_gemm, panels unpacked per call (kernels/int8/q32_gemm.cc);
// q32_packed on the panels q32_pack rewrote a matrix into at load (kernels/int8/q32_packed.cc).
template <class T> void q32_fused(const QuantMatmulArgs& a);
template <class T> void q32_gemm(const QuantMatmulArgs& a);
template <class T> void q32_packed(const QuantMatmulArgs& a);
// w: [rows, row_bytes] in T's blocks (rows a multiple of 16), packed in place.
template <class T> void q32_pack(uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_in);
// K types (Q2_K..Q6_K): activations rounded per super-block of 256, integer sub-block scales
// (kernels/int8/k_fused.cc on AVX-512, k_fused_vec.cc below it; kernels/int8/k_gemm.cc).
template <krows::Kind K> void k_fused(const QuantMatmulArgs& a);
template <krows::Kind K> void k_gemm(const QuantMatmulArgs& a);
// AVX2 levels: prompt heights, eight weight rows a vector (kernels/int8/k_fused_vec.cc).
template <krows::Kind K> void k_lanes(const QuantMatmulArgs& a);
template <krows::Kind K> void k_packed(const QuantMatmulArgs& a);
template <krows::Kind K> void k_pack(uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_in);

}  // namespace kvserve::KVSERVE_KERNEL_NS
#endif
