// The vector layer (kernels/vec/vec_int8.h) on AVX2: 32-byte vectors, one block of 32 each. The
// 4-product sums are vpdpbusd where the level has AVX-VNNI, else vpmaddubsw + vpmaddwd; the
// pair sums of vpmaddubsw saturate at 16 bits, so levels above 127 (kWide) are multiplied as
// two nibbles.
#pragma once

#include <cstddef>
#include <cstring>

#include "codecs/quant_blocks.h"
#include "kernels/int8/k_types.h"

namespace kvserve::KVSERVE_KERNEL_NS::vec {

constexpr int kBytes = 32;
constexpr int kBlocks = 1;
using I = __m256i;
using F = __m256;

inline I load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline I zero() { return _mm256_setzero_si256(); }
inline F fzero() { return _mm256_setzero_ps(); }

template <bool kWide>
inline I dot(I acc, I u, I s) {
#if KVSERVE_HAS_AVX_VNNI
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
  const I ones = _mm256_set1_epi16(1);
  if constexpr (!kWide) {
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), ones));
  } else {
    // u = 16·hi + lo: each pair of nibble products fits 16 bits (2 · 15 · 127).
    const I nib = _mm256_set1_epi8(0x0F);
    const I lo = _mm256_maddubs_epi16(_mm256_and_si256(u, nib), s);
    const I hi = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(u, 4), nib), s);
    return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(lo, ones),
                                                  _mm256_madd_epi16(hi, _mm256_set1_epi16(16))));
  }
#endif
}
inline I sub(I a, I b) { return _mm256_sub_epi32(a, b); }
template <int k>
inline I shl(I a) { return _mm256_slli_epi32(a, k); }
inline F to_float(I a) { return _mm256_cvtepi32_ps(a); }
inline F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
inline float sum(F a) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}
// acc + the sum of each 4 products s·x into its int32 lane, both signed (s in [-128, 127], x in
// [-127, 127]), exactly: |s| times x with s's sign (AVX2 levels only: int8/q32_fused.cc's batch kernel).
inline I signed_dot(I acc, I s, I x) {
#if KVSERVE_HAS_AVX_VNNI
  return _mm256_dpbusd_avx_epi32(acc, _mm256_abs_epi8(s), _mm256_sign_epi8(x, s));
#else
  const I pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(s), _mm256_sign_epi8(x, s));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
#endif
}
// Bytes less k, modulo 256 (unsigned levels back to signed ones).
inline I sub8(I a, int k) { return _mm256_sub_epi8(a, _mm256_set1_epi8(static_cast<char>(k))); }

// For int8/k_fused_vec.cc's prompt kernel (AVX2 levels only), whose vectors hold one weight row
// a 32-bit lane: 4 bytes at p in every lane; int16 lanes a + b; r[0..8) rows of 8 dwords to
// columns, in place (afterwards r[c] lane i = r[i] lane c before).
inline I broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline I add16(I a, I b) { return _mm256_add_epi16(a, b); }
inline void transpose8(I* r) {
  I t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h) {  // u[4h + c], 128-bit lane L: column 4L + c of rows 4h..4h+3
    u[4 * h] = _mm256_unpacklo_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h], t[4 * h + 2]);
    u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
    u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    r[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
    r[4 + c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
  }
}
inline F fload(const float* p) { return _mm256_loadu_ps(p); }
inline F fmul(F a, F b) { return _mm256_mul_ps(a, b); }
inline void fstore(float* p, F a) { _mm256_storeu_ps(p, a); }

// The sum of the int32 lanes (AVX2 levels only: int8/k_fused_vec.cc's batch kernel).
inline int32_t hsum(I a) {
  const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  const __m128i s2 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
  return _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, 1)));
}

// One block's F16 scale (or minimum; MXFP4's E8M0 scale) as a float.
using Factors = float;
template <class Block>
inline Factors scales(const Block* b) { return _cvtsh_ss(b->d); }
template <class Block>
inline Factors mins(const Block* b) { return _cvtsh_ss(b->m); }
inline Factors scales(const quant::BlockMXFP4* b) { return quant::e8m0_half(b->e); }
inline F spread(Factors w, const float* xd) { return _mm256_set1_ps(w * xd[0]); }

// The largest |x[i]| of x [n] (n a multiple of 32).
inline float amax(const float* x, int64_t n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
}

// x [32] times id, rounded half to even, into q [32].
inline void quantize32(const float* x, float id, int8_t* q) {
  const __m256 s = _mm256_set1_ps(id);
  I n[4];
  for (int i = 0; i < 4; ++i) n[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), s));
  // The packs work per 128-bit half: 32-bit lanes 0-3 of each n, then 4-7; put them back in order.
  const I packed = _mm256_packs_epi16(_mm256_packs_epi32(n[0], n[1]), _mm256_packs_epi32(n[2], n[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q),
                      _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
}

inline float round_block32(const float* x, int8_t* q) {
  const float d = amax(x, 32) / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
  quantize32(x, id, q);
  return _cvtsh_ss(_cvtss_sh(d, 0));  // the scale kept as F16 (round_activations)
}

inline int32_t block_lanes(const int8_t* q, int32_t* lanes) {
  const I sums = dot<false>(zero(), _mm256_set1_epi8(1), load(q));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes), sums);
  const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
  const __m128i s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, _MM_SHUFFLE(2, 3, 0, 1))));
}

// A block's 16 bytes of nibbles in value order: the low nibbles are values 0-15, the high 16-31.
inline I nibbles(const uint8_t* qs) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}
// 0x10 in the byte of each value whose bit is set in qh (bit j: value j).
inline I fifth_bits(const uint8_t* qh) {
  uint32_t h;
  std::memcpy(&h, qh, 4);
  // Byte j / 8 of h into byte j, then byte j's own bit j % 8 tested by OR-ing in all the others.
  const I spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(h)),
                                       _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101,
                                                          0x0202020202020202, 0x0303030303030303));
  const I others = _mm256_set1_epi64x(static_cast<int64_t>(0x7fbfdfeff7fbfdfeULL));
  const I set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi8(-1));
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

inline I levels(const quant::BlockQ8_0* b) { return _mm256_xor_si256(load(b->qs), _mm256_set1_epi8(static_cast<char>(0x80))); }
inline I levels(const quant::BlockQ4_0* b) { return nibbles(b->qs); }
inline I levels(const quant::BlockQ5_0* b) { return _mm256_or_si256(nibbles(b->qs), fifth_bits(b->qh)); }
inline I levels(const quant::BlockQ4_1* b) { return nibbles(b->qs); }
inline I levels(const quant::BlockQ5_1* b) { return _mm256_or_si256(nibbles(b->qs), fifth_bits(b->qh)); }
// The lookup types: each code's level plus the offset (IQ4_NL 128, MXFP4 16) from a 16-byte table.
inline I lookup(const uint8_t* qs, const int8_t* table, int32_t offset) {
  const __m128i lv = _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)), _mm_set1_epi8(static_cast<char>(offset)));
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(lv), nibbles(qs));
}
inline I levels(const quant::BlockIQ4_NL* b) { return lookup(b->qs, quant::kIq4nlLevels, 128); }
inline I levels(const quant::BlockMXFP4* b) { return lookup(b->qs, quant::kMxfp4Levels, 16); }

// The K types (int8/k_fused_vec.cc), their activations in natural order.

// Pairs of u·s products as int16 (exact for levels below 64: the K types').
inline I maddubs(I u, I s) { return _mm256_maddubs_epi16(u, s); }
// acc + the int16 products a·b summed in pairs into int32 lanes.
inline I dot16(I acc, I a, I b) {
#if KVSERVE_HAS_AVX_VNNI
  return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}
// v in int32 lane 0, the rest zero.
inline I lane0(int32_t v) { return _mm256_castsi128_si256(_mm_cvtsi32_si128(v)); }
inline F splat(float v) { return _mm256_set1_ps(v); }
// The int16 scales of one vector of values, kPer values a scale, from sc (natural order).
template <int kPer>
inline I scales16(const int16_t* sc) {
  if constexpr (kPer == 32) return _mm256_set1_epi16(sc[0]);
  else return _mm256_set_m128i(_mm_set1_epi16(sc[1]), _mm_set1_epi16(sc[0]));
}

// 16-bit lanes shifted right by k (a run-time count).
inline I shr(I v, int k) { return _mm256_srl_epi16(v, _mm_cvtsi32_si128(k)); }

// Values 32c..32c + 31 of a K super-block as unsigned levels (the level plus the type's
// offset, or the level alone for the types with a minimum).
template <krows::Kind kKind>
inline I k_levels(const uint8_t* block, int c) {
  using krows::Kind;
  const I low2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1), nib = _mm256_set1_epi8(0x0F);
  if constexpr (kKind == Kind::kQ4K || kKind == Kind::kQ5K) {
    // Sub-block c: the low (c even) or high nibbles of bytes 32(c / 2)...
    const auto* qs = block + (kKind == Kind::kQ5K ? offsetof(quant::BlockQ5_K, qs) : offsetof(quant::BlockQ4_K, qs));
    I q = _mm256_and_si256(shr(load(qs + 32 * (c / 2)), 4 * (c % 2)), nib);
    if constexpr (kKind == Kind::kQ5K)  // ...and bit c of qh[l] as value l's fifth
      q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(shr(load(block + offsetof(quant::BlockQ5_K, qh)), c), one), 4));
    return q;
  } else if constexpr (kKind == Kind::kQ6K) {
    // Half c / 4, quarter j: the low (j < 2) or high nibbles of ql[32(j % 2)...], qh's bits 2j, 2j + 1 on top.
    const auto* b = reinterpret_cast<const quant::BlockQ6_K*>(block);
    const int n = c / 4, j = c % 4;
    const I l = _mm256_and_si256(shr(load(b->ql + 64 * n + 32 * (j % 2)), 4 * (j / 2)), nib);
    const I h = _mm256_and_si256(shr(load(b->qh + 32 * n), 2 * j), low2);
    return _mm256_or_si256(l, _mm256_slli_epi16(h, 4));
  } else {
    // Q2_K, Q3_K: half c / 4, bit pair j of its 32 bytes of qs; Q3_K's third bit is bit 4(c / 4) + j of hmask[l].
    const auto* qs = block + (kKind == Kind::kQ3K ? offsetof(quant::BlockQ3_K, qs) : offsetof(quant::BlockQ2_K, qs));
    const int n = c / 4, j = c % 4;
    I q = _mm256_and_si256(shr(load(qs + 32 * n), 2 * j), low2);
    if constexpr (kKind == Kind::kQ3K)
      q = _mm256_or_si256(q, _mm256_slli_epi16(_mm256_and_si256(shr(load(block + offsetof(quant::BlockQ3_K, hmask)), 4 * n + j), one), 2));
    return q;
  }
}

}  // namespace kvserve::KVSERVE_KERNEL_NS::vec
