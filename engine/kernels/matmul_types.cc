// This level's row of kernel facts for each tensor type it multiplies (kernels/matmul_plan.h's
// MatmulTypeRow): the family, the fastest exact decoder, which integer, packed and F16 kernels
// the level has, and the integer kernels themselves. The one place that lists types for the
// matmul kernels; a new type is a row here (and its decoder), plus its kernels where it pays.
#include "kernels/matmul_plan.h"

#include "kernels/intrinsics.h"

#include <array>
#include <cstring>

#include "codecs/tensor_types.h"
#include "kernels/int8/int8_matmul.h"

KVSERVE_KERNEL_TARGET_BEGIN
#include "codecs/quant_decode.h"  // this level's copies of the decoders

namespace kvserve::KVSERVE_KERNEL_NS {
namespace {

void decode_f32(const void* src, float* dst, int64_t n) { std::memcpy(dst, src, n * sizeof(float)); }

void decode_f16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  int64_t i = 0;
#if KVSERVE_HAS_AVX512
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i))));
#elif KVSERVE_HAS_F16C
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h + i))));
#endif
  for (; i < n; ++i) dst[i] = quant::half_to_float(h[i]);
}

void decode_bf16(const void* src, float* dst, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(src);
  auto* out = reinterpret_cast<uint32_t*>(dst);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(h[i]) << 16;
}

#if KVSERVE_HAS_AVX512
// The most used block types decoded 16 values at a time, with the reference decoder's operations
// in its order (so the floats are the same): an int per value, to float, times the scale.
inline __m512 int_times(__m512i q, float d) { return _mm512_mul_ps(_mm512_cvtepi32_ps(q), _mm512_set1_ps(d)); }
inline __m512i bytes16(const uint8_t* p) { return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

void fast_q8_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const quant::BlockQ8_0*>(src);
  for (int64_t i = 0; i < n / quant::kQK; ++i, dst += quant::kQK) {
    const float d = quant::half_to_float(b[i].d);
    for (int h = 0; h < 2; ++h) {
      const __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[i].qs + 16 * h)));
      _mm512_storeu_ps(dst + 16 * h, int_times(q, d));
    }
  }
}

void fast_q4_0(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const quant::BlockQ4_0*>(src);
  const __m512i low = _mm512_set1_epi32(0xF), eight = _mm512_set1_epi32(8);
  for (int64_t i = 0; i < n / quant::kQK; ++i, dst += quant::kQK) {
    const float d = quant::half_to_float(b[i].d);
    const __m512i q = bytes16(b[i].qs);
    _mm512_storeu_ps(dst, int_times(_mm512_sub_epi32(_mm512_and_si512(q, low), eight), d));
    _mm512_storeu_ps(dst + 16, int_times(_mm512_sub_epi32(_mm512_srli_epi32(q, 4), eight), d));
  }
}

// IQ4_NL: each index's level from a 16-float table in one register, times the scale.
void fast_iq4_nl(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const quant::BlockIQ4_NL*>(src);
  alignas(64) float table[16];
  for (int k = 0; k < 16; ++k) table[k] = static_cast<float>(quant::kIq4nlLevels[k]);
  const __m512 levels = _mm512_load_ps(table);
  const __m512i low = _mm512_set1_epi32(0xF);
  for (int64_t i = 0; i < n / quant::kQK; ++i, dst += quant::kQK) {
    const __m512 d = _mm512_set1_ps(quant::half_to_float(b[i].d));
    const __m512i q = bytes16(b[i].qs);
    _mm512_storeu_ps(dst, _mm512_mul_ps(d, _mm512_permutexvar_ps(_mm512_and_si512(q, low), levels)));
    _mm512_storeu_ps(dst + 16, _mm512_mul_ps(d, _mm512_permutexvar_ps(_mm512_srli_epi32(q, 4), levels)));
  }
}

// Q4_K and Q5_K: d·q - m per sub-block of 32.
inline void scaled_minus(__m512i q, float d, float m, float* dst) {
  _mm512_storeu_ps(dst, _mm512_sub_ps(int_times(q, d), _mm512_set1_ps(m)));
}

template <bool kFifthBit>
void fast_k4(const uint8_t* scales, float d, float dmin, const uint8_t* qs, const uint8_t* qh, float* dst) {
  const __m512i low = _mm512_set1_epi32(0xF), sixteen = _mm512_set1_epi32(16);
  for (int j = 0; j < 4; ++j, qs += 32, dst += 64) {
    float d1, m1, d2, m2;
    quant::k_factors(2 * j, scales, d, dmin, &d1, &m1);
    quant::k_factors(2 * j + 1, scales, d, dmin, &d2, &m2);
    for (int h = 0; h < 2; ++h) {
      const __m512i q = bytes16(qs + 16 * h);
      __m512i lo = _mm512_and_si512(q, low), hi = _mm512_srli_epi32(q, 4);
      if constexpr (kFifthBit) {
        const __m512i bits = bytes16(qh + 16 * h);
        const __mmask16 b1 = _mm512_test_epi32_mask(bits, _mm512_set1_epi32(1 << (2 * j)));
        const __mmask16 b2 = _mm512_test_epi32_mask(bits, _mm512_set1_epi32(2 << (2 * j)));
        lo = _mm512_mask_add_epi32(lo, b1, lo, sixteen);
        hi = _mm512_mask_add_epi32(hi, b2, hi, sixteen);
      }
      scaled_minus(lo, d1, m1, dst + 16 * h);
      scaled_minus(hi, d2, m2, dst + 32 + 16 * h);
    }
  }
}

void fast_q4_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const quant::BlockQ4_K*>(src);
  for (int64_t i = 0; i < n / quant::kQK_K; ++i, dst += quant::kQK_K)
    fast_k4<false>(b[i].scales, quant::half_to_float(b[i].d), quant::half_to_float(b[i].dmin), b[i].qs, nullptr, dst);
}

void fast_q5_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const quant::BlockQ5_K*>(src);
  for (int64_t i = 0; i < n / quant::kQK_K; ++i, dst += quant::kQK_K)
    fast_k4<true>(b[i].scales, quant::half_to_float(b[i].d), quant::half_to_float(b[i].dmin), b[i].qs, b[i].qh, dst);
}

void fast_q6_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const quant::BlockQ6_K*>(src);
  const __m512i low = _mm512_set1_epi32(0xF), three = _mm512_set1_epi32(3), bias = _mm512_set1_epi32(32);
  for (int64_t i = 0; i < n / quant::kQK_K; ++i) {
    const float d = quant::half_to_float(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8, dst += 128)
      for (int g = 0; g < 2; ++g) {  // values l = 16g .. 16g+15 of each quarter
        const __m512i a = bytes16(ql + 16 * g), c = bytes16(ql + 32 + 16 * g), h = bytes16(qh + 16 * g);
        const __m512i q1 = _mm512_sub_epi32(
            _mm512_or_si512(_mm512_and_si512(a, low), _mm512_slli_epi32(_mm512_and_si512(h, three), 4)), bias);
        const __m512i q2 = _mm512_sub_epi32(
            _mm512_or_si512(_mm512_and_si512(c, low),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 2), three), 4)),
            bias);
        const __m512i q3 = _mm512_sub_epi32(
            _mm512_or_si512(_mm512_srli_epi32(a, 4),
                            _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(h, 4), three), 4)),
            bias);
        const __m512i q4 = _mm512_sub_epi32(
            _mm512_or_si512(_mm512_srli_epi32(c, 4), _mm512_slli_epi32(_mm512_srli_epi32(h, 6), 4)), bias);
        _mm512_storeu_ps(dst + 16 * g, int_times(q1, d * static_cast<float>(sc[g])));
        _mm512_storeu_ps(dst + 32 + 16 * g, int_times(q2, d * static_cast<float>(sc[g + 2])));
        _mm512_storeu_ps(dst + 64 + 16 * g, int_times(q3, d * static_cast<float>(sc[g + 4])));
        _mm512_storeu_ps(dst + 96 + 16 * g, int_times(q4, d * static_cast<float>(sc[g + 6])));
      }
  }
}

// Q2_K and Q3_K: per 128 values of a half, four shifts of the same 32 bytes, 16 values a scale.
void fast_q2_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const quant::BlockQ2_K*>(src);
  const __m512i three = _mm512_set1_epi32(3);
  for (int64_t i = 0; i < n / quant::kQK_K; ++i) {
    const float d = quant::half_to_float(b[i].d), dmin = quant::half_to_float(b[i].dmin);
    int is = 0;
    for (int half = 0; half < 2; ++half)
      for (int shift = 0; shift < 8; shift += 2)
        for (int part = 0; part < 2; ++part, ++is, dst += 16) {
          const __m512i q = _mm512_and_si512(_mm512_srli_epi32(bytes16(b[i].qs + 32 * half + 16 * part), shift), three);
          const float dl = d * static_cast<float>(b[i].scales[is] & 0xF), ml = dmin * static_cast<float>(b[i].scales[is] >> 4);
          _mm512_storeu_ps(dst, _mm512_sub_ps(int_times(q, dl), _mm512_set1_ps(ml)));
        }
  }
}

void fast_q3_k(const void* src, float* dst, int64_t n) {
  const auto* b = static_cast<const quant::BlockQ3_K*>(src);
  const __m512i three = _mm512_set1_epi32(3), four = _mm512_set1_epi32(4);
  for (int64_t i = 0; i < n / quant::kQK_K; ++i) {
    const float d = quant::half_to_float(b[i].d);
    int8_t scales[16];
    quant::q3_k_scales(b[i].scales, scales);
    int is = 0, bit = 0;
    for (int half = 0; half < 2; ++half)
      for (int shift = 0; shift < 8; shift += 2, ++bit)
        for (int part = 0; part < 2; ++part, ++is, dst += 16) {
          const __m512i q = _mm512_and_si512(_mm512_srli_epi32(bytes16(b[i].qs + 32 * half + 16 * part), shift), three);
          const __mmask16 high = _mm512_test_epi32_mask(bytes16(b[i].hmask + 16 * part), _mm512_set1_epi32(1 << bit));
          const __m512i v = _mm512_mask_sub_epi32(q, static_cast<__mmask16>(~high), q, four);
          _mm512_storeu_ps(dst, int_times(v, d * static_cast<float>(scales[is])));
        }
  }
}
#endif

constexpr bool kAvx512 = KVSERVE_HAS_AVX512 != 0;
constexpr bool kVecInt8 = KVSERVE_HAS_VEC_INT8 != 0;

// The block types have fused integer kernels and batch kernels at every level with the vector
// layer (kernels/vec/vec_int8.h); on AVX-512 levels the batch kernels are panel GEMMs, which
// with the packed panels need VNNI at run time (Q6_K's panels GFNI too: matmul_plan.cc), and
// take prompts too. On the AVX2 levels the K types' batch kernel takes prompts as fast as
// oneDNN's GEMM over decoded panels, the 32-value types' one is slower there (docs/performance.md).
template <class T, bool kPacks = true>
constexpr MatmulTypeRow block32(TensorType t, void (*decode)(const void*, float*, int64_t), int64_t fused_rows = kFusedMaxRows) {
  MatmulTypeRow r{.type = t, .family = MatmulFamily::kBlock32, .decode = decode, .int8 = kVecInt8, .int8_gemm = kVecInt8,
                  .fused_rows = fused_rows,
                  .int8_prompts = kAvx512, .int8_needs_avx512_vnni = kAvx512, .packs = kAvx512 && kPacks};
#if KVSERVE_HAS_VEC_INT8
  r.int8_kernels.fused = &q32_fused<T>;
  r.int8_kernels.gemm = &q32_gemm<T>;
#endif
#if KVSERVE_HAS_AVX512
  if constexpr (kPacks) {
    r.int8_kernels.packed = &q32_packed<T>;
    r.int8_kernels.pack = &q32_pack<T>;
  }
#endif
  return r;
}
template <krows::Kind K>
constexpr MatmulTypeRow block_k(TensorType t, void (*decode)(const void*, float*, int64_t), bool gfni = false) {
  MatmulTypeRow r{.type = t, .family = MatmulFamily::kBlockK, .decode = decode, .int8 = kVecInt8, .int8_gemm = kVecInt8,
                  .int8_prompts = kVecInt8, .int8_lanes = kVecInt8 && !kAvx512, .int8_needs_avx512_vnni = kAvx512,
                  .packs = kAvx512, .packs_need_gfni = gfni};
#if KVSERVE_HAS_VEC_INT8
  r.int8_kernels.fused = &k_fused<K>;
  r.int8_kernels.gemm = &k_gemm<K>;
#endif
#if KVSERVE_HAS_VEC_INT8 && !KVSERVE_HAS_AVX512
  r.int8_kernels.lanes = &k_lanes<K>;
#endif
#if KVSERVE_HAS_AVX512
  r.int8_kernels.packed = &k_packed<K>;
  r.int8_kernels.pack = &k_pack<K>;
#endif
  return r;
}

#if KVSERVE_HAS_AVX512
#define KVS_FAST(fast, scalar) fast
#else
#define KVS_FAST(fast, scalar) scalar
#endif

const std::array kRows = {
    MatmulTypeRow{.type = TensorType::kF32, .family = MatmulFamily::kFloat, .decode = decode_f32},
    MatmulTypeRow{.type = TensorType::kF16, .family = MatmulFamily::kFloat, .decode = decode_f16,
                  .packs = kAvx512, .f16_rows = kAvx512},
    MatmulTypeRow{.type = TensorType::kBF16, .family = MatmulFamily::kFloat, .decode = decode_bf16},
    block32<int8_types::TypeQ8_0>(TensorType::kQ8_0, KVS_FAST(fast_q8_0, quant::decode_q8_0)),
    block32<int8_types::TypeQ4_0>(TensorType::kQ4_0, KVS_FAST(fast_q4_0, quant::decode_q4_0)),
    block32<int8_types::TypeQ4_1>(TensorType::kQ4_1, quant::decode_q4_1),
    block32<int8_types::TypeQ5_0>(TensorType::kQ5_0, quant::decode_q5_0),
    block32<int8_types::TypeQ5_1>(TensorType::kQ5_1, quant::decode_q5_1),
    block32<int8_types::TypeIQ4_NL>(TensorType::kIQ4_NL, KVS_FAST(fast_iq4_nl, quant::decode_iq4_nl)),
    // MXFP4 (gpt-oss's experts): the fused kernel and the GEMM, no packed panels (int8/types32.h).
    // On AVX-512 the GEMM from 3 rows: the fused kernel looks each weight's level up again for
    // every pair of rows, and a 16-sequence MoE step's experts mostly see 3-5 rows
    // (docs/performance.md).
    block32<int8_types::TypeMXFP4, /*kPacks=*/false>(TensorType::kMXFP4, quant::decode_mxfp4, kAvx512 ? 2 : kFusedMaxRows),
    block_k<krows::Kind::kQ2K>(TensorType::kQ2_K, KVS_FAST(fast_q2_k, quant::decode_q2_k)),
    block_k<krows::Kind::kQ3K>(TensorType::kQ3_K, KVS_FAST(fast_q3_k, quant::decode_q3_k)),
    block_k<krows::Kind::kQ4K>(TensorType::kQ4_K, KVS_FAST(fast_q4_k, quant::decode_q4_k)),
    block_k<krows::Kind::kQ5K>(TensorType::kQ5_K, KVS_FAST(fast_q5_k, quant::decode_q5_k)),
    block_k<krows::Kind::kQ6K>(TensorType::kQ6_K, KVS_FAST(fast_q6_k, quant::decode_q6_k), /*gfni=*/true),
};
#undef KVS_FAST

// Asked twice per product (the weights' plan, then quant_matmul's): indexed by type id, not searched.
constexpr uint32_t kMaxTypeId = 64;
const std::array<const MatmulTypeRow*, kMaxTypeId> kById = [] {
  std::array<const MatmulTypeRow*, kMaxTypeId> by_id{};
  for (const MatmulTypeRow& r : kRows) by_id[static_cast<uint32_t>(r.type)] = &r;
  return by_id;
}();

}  // namespace

const MatmulTypeRow* matmul_type_row(uint32_t type) { return type < kMaxTypeId ? kById[type] : nullptr; }

}  // namespace kvserve::KVSERVE_KERNEL_NS
KVSERVE_KERNEL_TARGET_END
