// The K types' activation rows for the integer path (kernels/int8/k_fused.cc, 1-4 rows, and
// kernels/int8/k_gemm.cc, 5-64): each row rounded per super-block of 256 with one float
// scale, as round_activations(x, q, 256) defines, and the sums of its levels that the
// minimums and offsets need; each type's levels in that order. Included inside a kernel level's
// target region (after int8/block32_avx512.h) by both.
#pragma once

#include "kernels/int8/k_types.h"

#if KVSERVE_HAS_AVX512
namespace kvserve::KVSERVE_KERNEL_NS::krows {

// Q4_K/Q5_K store sub-blocks 2j and 2j+1 as the low and high nibbles of the same 32 bytes, so
// 64 bytes hold sub-blocks {0, 2} (low) and {1, 3} (high): the activations of those types are
// kept in that order, sub-blocks 0, 2, 1, 3, 4, 6, 5, 7 (the order is its own inverse).
constexpr int kK4Order[8] = {0, 2, 1, 3, 4, 6, 5, 7};

// One activation row rounded per super-block.
struct KRow {
  const int8_t* q;         // [n_in] levels, in the weight type's order
  const float* d;          // [n_in / 256] scales
  const int16_t* sums16;   // [n_in / 16] sums of each 16 levels, natural order
  const int16_t* sums32;   // [n_in / 32] sums of each 32 levels, natural order
};

inline int64_t row_stride(int64_t n_in) { return (n_in + n_in / 256 * 4 + n_in / 16 * 2 + n_in / 32 * 2 + 63) / 64 * 64; }

inline KRow round_row_k(const float* x, int64_t n_in, Kind kind, uint8_t* scratch) {
  auto* q = reinterpret_cast<int8_t*>(scratch);
  auto* d = reinterpret_cast<float*>(scratch + n_in);
  auto* s16 = reinterpret_cast<int16_t*>(d + n_in / 256);
  int16_t* s32 = s16 + n_in / 16;
  for (int64_t k = 0; k < n_in / 256; ++k) {
    const float* xb = x + 256 * k;
    __m512 amax = _mm512_setzero_ps();
    for (int i = 0; i < 16; ++i) amax = _mm512_max_ps(amax, _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * i)));
    const float dk = _mm512_reduce_max_ps(amax) / 127.0f, id = dk > 0.0f ? 1.0f / dk : 0.0f;
    d[k] = dk;
    for (int i = 0; i < 16; ++i) {
      const __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 16 * i), _mm512_set1_ps(id)));
      const int sub = i / 2, at = sixteen_value_scales(kind) ? sub : kK4Order[sub];
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 256 * k + 32 * at + 16 * (i % 2)), _mm512_cvtsepi32_epi8(v));
      s16[16 * k + i] = static_cast<int16_t>(_mm512_reduce_add_epi32(v));
    }
    for (int j = 0; j < 8; ++j) s32[8 * k + j] = static_cast<int16_t>(s16[16 * k + 2 * j] + s16[16 * k + 2 * j + 1]);
  }
  return {q, d, s16, s32};
}

// Levels c (64 of them, activations' order: chunk c) of one super-block of one row.
template <Kind kKind>
inline __m512i levels_of(const uint8_t* block, int c) {
  using levels::load32;
  using levels::load64;
  const __m512i nib = _mm512_set1_epi8(0x0F);
  if constexpr (kKind == Kind::kQ3K || kKind == Kind::kQ2K) {
    // Chunk c: the 32 bytes of qs of half c / 2, whose bit pairs 2j and 2j + 1 hold values
    // 32j..32j + 31 of the half (j = 2(c % 2) for the chunk's first 32, the next for the rest);
    // Q3_K's third bit of value l of group g of the whole block is bit g of hmask[l].
    const int half = c / 2, j = 2 * (c % 2);
    const uint8_t* qs = block + (kKind == Kind::kQ3K ? offsetof(quant::BlockQ3_K, qs) : offsetof(quant::BlockQ2_K, qs));
    const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(2 * j)),
                                             _mm256_set1_epi16(static_cast<int16_t>(2 * j + 2)), 1);
    __m512i q = _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(load32(qs + 32 * half)), shift),
                                 _mm512_set1_epi8(3));
    if constexpr (kKind == Kind::kQ3K) {
      const int g = 4 * half + j;
      const __m512i hs = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(g)),
                                            _mm256_set1_epi16(static_cast<int16_t>(g + 1)), 1);
      const __m512i h = _mm512_broadcast_i64x4(load32(block + offsetof(quant::BlockQ3_K, hmask)));
      q = _mm512_or_si512(q, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(h, hs), _mm512_set1_epi8(1)), 2));
    }
    return q;
  } else if constexpr (kKind == Kind::kQ6K) {
    const auto* b = reinterpret_cast<const quant::BlockQ6_K*>(block);
    const int n = c / 2;
    const __m512i l = load64(b->ql + 64 * n), h = _mm512_broadcast_i64x4(load32(b->qh + 32 * n));
    // Low nibbles with qh bits 0-1 and 2-3, or high nibbles with bits 4-5 and 6-7.
    const __m512i shift = c % 2 == 0 ? _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1)
                                     : _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    const __m512i low = c % 2 == 0 ? _mm512_and_si512(l, nib) : _mm512_and_si512(_mm512_srli_epi16(l, 4), nib);
    return _mm512_or_si512(low, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(h, shift), _mm512_set1_epi8(3)), 4));
  } else {
    const uint8_t* qs = block + (kKind == Kind::kQ5K ? offsetof(quant::BlockQ5_K, qs) : offsetof(quant::BlockQ4_K, qs));
    const __m512i raw = load64(qs + 64 * (c / 2));
    __m512i q = c % 2 == 0 ? _mm512_and_si512(raw, nib) : _mm512_and_si512(_mm512_srli_epi16(raw, 4), nib);
    if constexpr (kKind == Kind::kQ5K) {
      // Bit t of qh[l] is the fifth bit of value 32t + l; chunk c holds sub-blocks kK4Order[2c], [2c+1].
      const __m512i h = _mm512_broadcast_i64x4(load32(block + offsetof(quant::BlockQ5_K, qh)));
      const __m512i shift = _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(kK4Order[2 * c])),
                                               _mm256_set1_epi16(static_cast<int16_t>(kK4Order[2 * c + 1])), 1);
      q = _mm512_or_si512(q, _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(h, shift), _mm512_set1_epi8(1)), 4));
    }
    return q;
  }
}

inline __m512i byte_of(__m512i words, int b) { return _mm512_and_si512(_mm512_srli_epi32(words, 8 * b), _mm512_set1_epi32(0xFF)); }

// Q4_K/Q5_K's 12 scale bytes of 16 rows (a0, a1, a2: lane i = row i's bytes 0-3, 4-7, 8-11, as
// quant_levels' k4_scale_words reads them) as the int32 scale of each sub-block, sc[8], and the
// minimums as int16 pairs of sub-blocks (2j, 2j + 1), pr[4]; lane i = row i.
inline void k4_scales(__m512i a0, __m512i a1, __m512i a2, __m512i* sc, __m512i* pr) {
  const __m512i m6 = _mm512_set1_epi32(0x3f3f3f3f), m4 = _mm512_set1_epi32(0x0f0f0f0f), m2 = _mm512_set1_epi32(0x03030303);
  const __m512i s_lo = _mm512_and_si512(a0, m6);
  const __m512i s_hi = _mm512_or_si512(_mm512_and_si512(a2, m4), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a0, 6), m2), 4));
  const __m512i m_lo = _mm512_and_si512(a1, m6);
  const __m512i m_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(a2, 4), m4),
                                       _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a1, 6), m2), 4));
  for (int b = 0; b < 4; ++b) sc[b] = byte_of(s_lo, b), sc[4 + b] = byte_of(s_hi, b);
  for (int j = 0; j < 2; ++j) {
    pr[j] = _mm512_or_si512(byte_of(m_lo, 2 * j), _mm512_slli_epi32(byte_of(m_lo, 2 * j + 1), 16));
    pr[2 + j] = _mm512_or_si512(byte_of(m_hi, 2 * j), _mm512_slli_epi32(byte_of(m_hi, 2 * j + 1), 16));
  }
}

// Q6_K's 16 int8 scales of 16 rows (words[q]: lane i = row i's scales 4q..4q+3) as int32,
// sc[16], and as int16 pairs (2j, 2j + 1), pr[8]; lane i = row i.
inline void k6_scales(const __m512i* words, __m512i* sc, __m512i* pr) {
  for (int q = 0; q < 4; ++q)
    for (int b = 0; b < 4; ++b) sc[4 * q + b] = _mm512_srai_epi32(_mm512_slli_epi32(words[q], 24 - 8 * b), 24);
  for (int j = 0; j < 8; ++j)
    pr[j] = _mm512_or_si512(_mm512_and_si512(sc[2 * j], _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(sc[2 * j + 1], 16));
}

// The F16 in the low (half_lo) or high half (half_hi) of each 32-bit lane, as a float.
inline __m512 half_lo(__m512i words) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words)); }
inline __m512 half_hi(__m512i words) { return half_lo(_mm512_srli_epi32(words, 16)); }

// Q3_K's 12 scale bytes of 16 rows (a0, a1, a2: lane i = row i's bytes 0-3, 4-7, 8-11) as the
// four words of its 16 int8 scales (offset 32 removed), as k6_scales takes them: scale j has
// its low four bits in the low (j < 8) or high nibble of byte j % 8 and its top two in bits
// 2(j / 4), 2(j / 4) + 1 of byte 8 + j % 4.
inline void k3_scale_words(__m512i a0, __m512i a1, __m512i a2, __m512i* words) {
  const __m512i m4 = _mm512_set1_epi32(0x0f0f0f0f), m2 = _mm512_set1_epi32(0x03030303);
  const __m512i lows[4] = {_mm512_and_si512(a0, m4), _mm512_and_si512(a1, m4), _mm512_and_si512(_mm512_srli_epi32(a0, 4), m4),
                           _mm512_and_si512(_mm512_srli_epi32(a1, 4), m4)};
  for (int q = 0; q < 4; ++q)
    words[q] = _mm512_sub_epi8(
        _mm512_or_si512(lows[q], _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(a2, 2 * q), m2), 4)),
        _mm512_set1_epi8(32));
}

// Q2_K's 16 scale bytes of 16 rows (words[q]: lane i = row i's bytes 4q..4q+3; each byte's low
// nibble a scale, its high one a minimum) as int32 scales, sc[16], and the minimums as int16
// pairs (2j, 2j + 1), pr[8]; lane i = row i.
inline void k2_scales(const __m512i* words, __m512i* sc, __m512i* pr) {
  __m512i mins[16];
  for (int q = 0; q < 4; ++q)
    for (int b = 0; b < 4; ++b) {
      const __m512i byte = _mm512_and_si512(_mm512_srli_epi32(words[q], 8 * b), _mm512_set1_epi32(0xFF));
      sc[4 * q + b] = _mm512_and_si512(byte, _mm512_set1_epi32(0x0F));
      mins[4 * q + b] = _mm512_srli_epi32(byte, 4);
    }
  for (int j = 0; j < 8; ++j) pr[j] = _mm512_or_si512(mins[2 * j], _mm512_slli_epi32(mins[2 * j + 1], 16));
}

// a.m rows of a.x rounded for `kind` into a.scratch (row_stride(a.n_in) bytes each): x[0..a.m).
inline void round_rows_k(const QuantMatmulArgs& a, Kind kind, KRow* x) {
  const int64_t stride = row_stride(a.n_in);
#pragma omp parallel for schedule(static) if (a.m > 4)
  for (int64_t r = 0; r < a.m; ++r)
    x[r] = round_row_k(a.x + r * a.n_in, a.n_in, kind, static_cast<uint8_t*>(a.scratch) + r * stride);
}

}  // namespace kvserve::KVSERVE_KERNEL_NS::krows
#endif
