// The integer paths' shared pieces (kernels/quant_dot_int8.cc, the staged path for 5-64 rows,
// kernels/quant_matvec_int8.cc, the fused one for 1-4, and kernels/quant_kdot_int8.cc, the K
// types'): rounding a block of activations, each 32-value block type's levels for 64 values as
// unsigned bytes in the activations' order, ready for vpdpbusd, and the K types' packed scales.
// Included inside a kernel level's target region (AVX-512 with VNNI) by each.
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

// x [32] rounded as round_activations rounds it into q [32]; returns the block scale.
inline float round_block32(const float* x, int8_t* q) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
  const float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
  const __m512 s = _mm512_set1_ps(id);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, s))));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q + 16), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, s))));
  return d;
}

// One activation row rounded per block of 32, with the sums the types' offsets and minimums
// need.
struct Row32 {
  const int8_t* q;        // [n_in] levels
  const float* d;         // [n_in / 32] block scales
  const int32_t* lanes;   // [n_in / 4] sums of each 4 levels (one vpdpbusd lane)
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
    d[b] = round_block32(x + 32 * b, q + 32 * b);
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_set1_epi8(1), load32(q + 32 * b));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes + 8 * b), sums);
    const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    const __m128i s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    sum[b] = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, _MM_SHUFFLE(2, 3, 0, 1))));
  }
  return {q, d, lanes, sum};
}

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

// Two IQ4_NL blocks: Q4_0's nibble order, each index looked up as its level + 128 (unsigned;
// the offset is 128).
inline __m512i iq4_nl_pair(const quant::BlockIQ4_NL* b) {
  const __m512i idx = q4_0_pair(reinterpret_cast<const quant::BlockQ4_0*>(b));
  const __m128i lv = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(quant::kIq4nlLevels)),
                                   _mm_set1_epi8(static_cast<char>(0x80)));
  return _mm512_shuffle_epi8(_mm512_broadcast_i32x4(lv), idx);
}

// The 32-value block types on the integer path, for the fused kernel, the panel GEMM and the
// packed panels: the block, the levels of two blocks (64 values, value order, unsigned), the
// levels' offset, whether the block has a minimum after its scale (value = d·q + m; then the
// offset is 0), and the bits a packed panel keeps of each level (8, 5 or 4; IQ4_NL keeps its
// 4-bit indices and looks them up as it reads: `lookup`).
template <typename B, int32_t kOffset, bool kHasMin, int kBits, bool kLookup = false>
struct Type32 {
  using Block = B;
  static constexpr int32_t offset = kOffset;
  static constexpr bool has_min = kHasMin;
  static constexpr int bits = kBits;
  static constexpr bool lookup = kLookup;
};
struct TypeQ8_0 : Type32<quant::BlockQ8_0, 128, false, 8> {
  static __m512i levels(const Block* b) { return q8_0_pair(b); }
};
struct TypeQ4_0 : Type32<quant::BlockQ4_0, 8, false, 4> {
  static __m512i levels(const Block* b) { return q4_0_pair(b); }
};
struct TypeQ5_0 : Type32<quant::BlockQ5_0, 16, false, 5> {
  static __m512i levels(const Block* b) { return q5_0_pair(b); }
};
struct TypeQ4_1 : Type32<quant::BlockQ4_1, 0, true, 4> {
  static __m512i levels(const Block* b) { return q4_1_pair(b); }
};
struct TypeQ5_1 : Type32<quant::BlockQ5_1, 0, true, 5> {
  static __m512i levels(const Block* b) { return q5_1_pair(b); }
};
struct TypeIQ4_NL : Type32<quant::BlockIQ4_NL, 128, false, 4, true> {
  static __m512i levels(const Block* b) { return iq4_nl_pair(b); }
};

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
