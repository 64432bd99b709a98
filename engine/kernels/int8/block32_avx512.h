// The AVX-512 integer kernels' shared pieces: each 32-value block type's levels for 64 values
// as unsigned bytes in the activations' order, ready for vpdpbusd (the vector layer's levels()
// at this level, kernels/vec/int8_avx512.h), and the K types' packed scales. Included inside a
// kernel level's target region (AVX-512 with VNNI).
#pragma once

// The integer kernels' casts and extracts between vector widths inline GCC 12's self-initialised
// "undefined" vectors, which its uninitialized-use warnings then flag inside our functions: off
// for every file that includes this (all of them use those casts).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#if KVSERVE_HAS_AVX512
namespace kvserve::KVSERVE_KERNEL_NS::levels {

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m512i load64(const void* p) { return _mm512_loadu_si512(p); }
inline __m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// Two Q8_0 blocks: w + 128 (so that the levels are unsigned; the offset is 128).
inline __m512i q8_0_pair(const quant::BlockQ8_0* b) {
  return _mm512_xor_si512(join(load32(b[0].qs), load32(b[1].qs)), _mm512_set1_epi8(static_cast<char>(0x80)));
}

// The nibbles of two blocks' 16 bytes each in value order: [low nibbles of qs0, high of qs0,
// low of qs1, high of qs1].
inline __m512i nibble_pair(const uint8_t* qs0, const uint8_t* qs1) {
  const __m256i both = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs0))),
                                               _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs1)), 1);
  const __m256i nib = _mm256_set1_epi8(0x0F);
  const __m512i z = join(_mm256_and_si256(both, nib), _mm256_and_si256(_mm256_srli_epi16(both, 4), nib));
  return _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
}

// Two Q4_0 blocks (offset 8).
inline __m512i q4_0_pair(const quant::BlockQ4_0* b) { return nibble_pair(b[0].qs, b[1].qs); }

// The fifth bits of two blocks (bit j of each block's qh word belongs to its value j) as 0x10
// in the bytes of the values that have it, in value order.
inline __m512i fifth_bits(const uint8_t* qh0, const uint8_t* qh1) {
  uint32_t h0, h1;
  std::memcpy(&h0, qh0, 4);
  std::memcpy(&h1, qh1, 4);
  const __mmask64 fifth = static_cast<__mmask64>(h0) | (static_cast<__mmask64>(h1) << 32);
  return _mm512_maskz_mov_epi8(fifth, _mm512_set1_epi8(0x10));
}

// Two Q5_0 blocks (offset 16): Q4_0's nibbles with each value's fifth bit.
inline __m512i q5_0_pair(const quant::BlockQ5_0* b) {
  return _mm512_or_si512(nibble_pair(b[0].qs, b[1].qs), fifth_bits(b[0].qh, b[1].qh));
}

// Two Q4_1 blocks: their levels 0-15 (no offset; the blocks' minimums are added apart).
inline __m512i q4_1_pair(const quant::BlockQ4_1* b) { return nibble_pair(b[0].qs, b[1].qs); }

// Two Q5_1 blocks: levels 0-31, the fifth bits as Q5_0's.
inline __m512i q5_1_pair(const quant::BlockQ5_1* b) {
  return _mm512_or_si512(nibble_pair(b[0].qs, b[1].qs), fifth_bits(b[0].qh, b[1].qh));
}

// A 16-level table (IQ4_NL's, MXFP4's) with the type's offset added: unsigned bytes for vpshufb.
inline __m128i lookup_table(const int8_t* table, int32_t offset) {
  return _mm_add_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)), _mm_set1_epi8(static_cast<char>(offset)));
}

// Two blocks of a lookup type (16 bytes of codes after a one- or two-byte scale): Q4_0's nibble
// order, each code looked up as its level plus the offset.
inline __m512i lookup_pair(const uint8_t* qs0, const uint8_t* qs1, const int8_t* table, int32_t offset) {
  return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(lookup_table(table, offset)), nibble_pair(qs0, qs1));
}
inline __m512i iq4_nl_pair(const quant::BlockIQ4_NL* b) { return lookup_pair(b[0].qs, b[1].qs, quant::kIq4nlLevels, 128); }
inline __m512i mxfp4_pair(const quant::BlockMXFP4* b) { return lookup_pair(b[0].qs, b[1].qs, quant::kMxfp4Levels, 16); }

// E8M0 exponents (one per int32 lane, 0-255) as quant::e8m0_half's floats: 2^(e - 128), the
// subnormal 2^-127 and 2^-128 for e = 1 and 0.
inline __m512 e8m0_halves(__m512i e) {
  const __mmask16 small = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  return _mm512_castsi512_ps(_mm512_mask_mov_epi32(normal, small, sub));
}

// Q4_K/Q5_K's 8 six-bit scales and mins (quant::k_scale_min's layout) as bytes in 32-bit words,
// so no byte stores meet a vector load: {scales 0-3, scales 4-7, mins 0-3, mins 4-7}.
inline void k4_scale_words(const uint8_t* scales, uint32_t out[4]) {
  uint32_t a[3];
  std::memcpy(a, scales, 12);
  out[0] = a[0] & 0x3f3f3f3f;
  out[1] = (a[2] & 0x0f0f0f0f) | (((a[0] >> 6) & 0x03030303) << 4);
  out[2] = a[1] & 0x3f3f3f3f;
  out[3] = ((a[2] >> 4) & 0x0f0f0f0f) | (((a[1] >> 6) & 0x03030303) << 4);
}

}  // namespace kvserve::KVSERVE_KERNEL_NS::levels
#endif
