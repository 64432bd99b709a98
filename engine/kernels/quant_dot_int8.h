// The integer path of the quantized matmul: activations rounded to 8 bits per block of 32 (one
// float scale each, as llama.cpp's Q8_0 activations), multiplied with the weights' integer
// levels by AVX-512 VNNI (vpdpbusd), 64 values an instruction, the block scales applied in float.
// For decode-sized batches on Q8_0, Q4_0, Q4_K, Q5_K and Q6_K weights: there decoding to float
// costs more than streaming the weights, and this path does not decode.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/kernel_level.h"
#include "kernels/quant_matmul.h"

namespace kvserve {

// One block of 32 activations as the integer path rounds them (the scalar definition the tests
// multiply with): d = max |x| / 127, q = round-half-even(x / d). x: [32]; q: [32]. Returns d.
inline float round_activations(const float* x, int8_t* q) {
  float amax = 0.0f;
  for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
  for (int i = 0; i < 32; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] * id));
  return d;
}

// Up to this many activation rows take the fused kernel (quant_matvec_int8) where it applies.
constexpr int64_t kMatvecMaxRows = 4;

// Scratch bytes the integer path needs for m rows of n_in activations.
inline int64_t int8_scratch_bytes(int64_t m, int64_t n_in) { return m * n_in * 3 + 256; }

}  // namespace kvserve

#ifdef KVSERVE_KERNEL_NS
namespace kvserve::KVSERVE_KERNEL_NS {

// Whether quant_matmul_int8 takes this product (the level, the CPU, the type and the shape).
bool int8_path_applies(uint32_t type, int64_t n_in);
// a.scratch: int8_scratch_bytes(a.m, a.n_in) bytes.
void quant_matmul_int8(const QuantMatmulArgs& a);
// Up to kMatvecMaxRows activation rows (decoding one to four streams) on Q8_0, Q4_0, Q4_K, Q5_K
// or Q6_K weights: the same rounding and integer products, fused so that nothing is staged in
// memory between reading a weight and multiplying it (kernels/quant_matvec_int8.cc).
// quant_matmul_int8 takes it where it applies.
bool int8_matvec_applies(uint32_t type, int64_t n_in);
void quant_matvec_int8(const QuantMatmulArgs& a);

}  // namespace kvserve::KVSERVE_KERNEL_NS
#endif
