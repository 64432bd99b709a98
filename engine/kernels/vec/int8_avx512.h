// The vector layer (kernels/vec/vec_int8.h) on AVX-512 with VNNI: 64-byte vectors, two blocks
// of 32 each, vpdpbusd.
#pragma once

#include "codecs/quant_blocks.h"
#include "kernels/int8/block32_avx512.h"

namespace kvserve::KVSERVE_KERNEL_NS::vec {

constexpr int kBytes = 64;
constexpr int kBlocks = 2;
using I = __m512i;
using F = __m512;

inline I load(const void* p) { return _mm512_loadu_si512(p); }
inline I zero() { return _mm512_setzero_si512(); }
inline F fzero() { return _mm512_setzero_ps(); }
template <bool kWide>
inline I dot(I acc, I u, I s) { return _mm512_dpbusd_epi32(acc, u, s); }
inline I sub(I a, I b) { return _mm512_sub_epi32(a, b); }
template <int k>
inline I shl(I a) { return _mm512_slli_epi32(a, k); }
inline F to_float(I a) { return _mm512_cvtepi32_ps(a); }
inline F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
inline float sum(F a) { return _mm512_reduce_add_ps(a); }

// Two blocks' F16 scales (or minimums; MXFP4's E8M0 scales) as floats in lanes 0 and 1.
using Factors = __m128;
inline Factors halves(uint16_t a, uint16_t b) { return _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(a), b, 1)); }
template <class Block>
inline Factors scales(const Block* b) { return halves(b[0].d, b[1].d); }
template <class Block>
inline Factors mins(const Block* b) { return halves(b[0].m, b[1].m); }
inline Factors scales(const quant::BlockMXFP4* b) { return _mm_setr_ps(quant::e8m0_half(b[0].e), quant::e8m0_half(b[1].e), 0.0f, 0.0f); }
inline F spread(Factors w, const float* xd) {
  const __m128 s = _mm_mul_ps(w, _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(xd))));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                               _mm512_castps128_ps512(s));
}

inline float round_block32(const float* x, int8_t* q) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
  const __m512 s = _mm512_set1_ps(id);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, s))));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, s))));
  return _cvtsh_ss(_cvtss_sh(d, 0));  // the scale kept as F16 (round_activations)
}

inline int32_t block_lanes(const int8_t* q, int32_t* lanes) {
  const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), levels::load32(q));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), sums);
  const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
  const __m128i s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, _MM_SHUFFLE(2, 3, 0, 1))));
}

inline I levels(const quant::BlockQ8_0* b) { return levels::q8_0_pair(b); }
inline I levels(const quant::BlockQ4_0* b) { return levels::q4_0_pair(b); }
inline I levels(const quant::BlockQ5_0* b) { return levels::q5_0_pair(b); }
inline I levels(const quant::BlockQ4_1* b) { return levels::q4_1_pair(b); }
inline I levels(const quant::BlockQ5_1* b) { return levels::q5_1_pair(b); }
inline I levels(const quant::BlockIQ4_NL* b) { return levels::iq4_nl_pair(b); }
inline I levels(const quant::BlockMXFP4* b) { return levels::mxfp4_pair(b); }

}  // namespace kvserve::KVSERVE_KERNEL_NS::vec
