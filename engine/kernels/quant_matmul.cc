#include "kernels/quant_matmul.h"

#include "kernels/intrinsics.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <utility>

#include "codecs/tensor_types.h"
#include "kernels/quant_dot_int8.h"
#include "kernels/small_batch_matmul.h"

KVSERVE_KERNEL_TARGET_BEGIN
#include "codecs/quant_decode.h"  // this level's copies of the decoders

namespace kvserve::KVSERVE_KERNEL_NS {
namespace {

using DecodeFn = void (*)(const void* src, float* dst, int64_t n);

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

DecodeFn decoder(uint32_t type) {
#if KVSERVE_HAS_AVX512
  switch (static_cast<TensorType>(type)) {
    case TensorType::kQ8_0: return fast_q8_0;
    case TensorType::kQ4_0: return fast_q4_0;
    case TensorType::kIQ4_NL: return fast_iq4_nl;
    case TensorType::kQ4_K: return fast_q4_k;
    case TensorType::kQ5_K: return fast_q5_k;
    case TensorType::kQ6_K: return fast_q6_k;
    case TensorType::kQ2_K: return fast_q2_k;
    case TensorType::kQ3_K: return fast_q3_k;
    default: break;
  }
#endif
  switch (static_cast<TensorType>(type)) {
    case TensorType::kF32: return decode_f32;
    case TensorType::kF16: return decode_f16;
    case TensorType::kBF16: return decode_bf16;
    case TensorType::kQ4_0: return quant::decode_q4_0;
    case TensorType::kQ4_1: return quant::decode_q4_1;
    case TensorType::kQ5_0: return quant::decode_q5_0;
    case TensorType::kQ5_1: return quant::decode_q5_1;
    case TensorType::kQ8_0: return quant::decode_q8_0;
    case TensorType::kIQ4_NL: return quant::decode_iq4_nl;
    case TensorType::kQ2_K: return quant::decode_q2_k;
    case TensorType::kQ3_K: return quant::decode_q3_k;
    case TensorType::kQ4_K: return quant::decode_q4_k;
    case TensorType::kQ5_K: return quant::decode_q5_k;
    case TensorType::kQ6_K: return quant::decode_q6_k;
    default: return nullptr;
  }
}

constexpr int kG = 4;          // output rows decoded together
constexpr int64_t kKc = 256;   // values of each row per chunk: kG rows of it, and the chunk of every x row, stay in L1
constexpr int64_t kPrefetchGroups = 2;
#if KVSERVE_HAS_AVX512
constexpr int kW = 16;         // floats per vector
constexpr int kMaxR = 6;       // x rows per pass: kG·6 accumulators of 32 registers
#elif KVSERVE_KERNEL_LEVEL_ID == 1
constexpr int kW = 8;
constexpr int kMaxR = 2;       // kG·2 accumulators of 16 registers
#else
constexpr int kW = 8;
constexpr int kMaxR = 4;
#endif

// part[r][g][kW] += the products of R rows of x with the kG decoded rows over [0, kc): vector
// partial sums, reduced once per call of quant_matmul. wbuf: [kG, kKc]; x: [R, ldx]
// (already offset to the chunk); part: [R, kG, kW].
template <int R>
void chunk_fma(const float* wbuf, int64_t kc, const float* x, int64_t ldx, float* part) {
  const int64_t kv = kc / kW * kW;
#if KVSERVE_HAS_AVX512 || KVSERVE_KERNEL_LEVEL_ID == 1
#if KVSERVE_HAS_AVX512
  using V = __m512;
#define KVS_LOAD(p) _mm512_loadu_ps(p)
#define KVS_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define KVS_STORE(p, v) _mm512_storeu_ps(p, v)
#else
  using V = __m256;
#define KVS_LOAD(p) _mm256_loadu_ps(p)
#define KVS_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define KVS_STORE(p, v) _mm256_storeu_ps(p, v)
#endif
  V acc[R][kG];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) acc[r][g] = KVS_LOAD(part + (r * kG + g) * kW);
  for (int64_t k = 0; k < kv; k += kW) {
    V w[kG];
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) w[g] = KVS_LOAD(wbuf + g * kKc + k);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const V xv = KVS_LOAD(x + r * ldx + k);
#pragma GCC unroll 8
      for (int g = 0; g < kG; ++g) acc[r][g] = KVS_FMA(xv, w[g], acc[r][g]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) KVS_STORE(part + (r * kG + g) * kW, acc[r][g]);
#undef KVS_LOAD
#undef KVS_FMA
#undef KVS_STORE
#else
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g) {
      float* p = part + (r * kG + g) * kW;
      for (int64_t k = 0; k < kv; k += kW)
        for (int l = 0; l < kW; ++l) p[l] += x[r * ldx + k + l] * wbuf[g * kKc + k + l];
    }
#endif
  // Rows of F32/F16/BF16 weights need not be a multiple of the vector width.
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int g = 0; g < kG; ++g)
      for (int64_t k = kv; k < kc; ++k) part[(r * kG + g) * kW] += x[r * ldx + k] * wbuf[g * kKc + k];
}

// The sum of a vector's lanes: p: [kW].
inline float lane_sum(const float* p) {
#if KVSERVE_HAS_AVX512
  return _mm512_reduce_add_ps(_mm512_loadu_ps(p));
#elif KVSERVE_KERNEL_LEVEL_ID == 1
  const __m256 v = _mm256_loadu_ps(p);
  __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  q = _mm_add_ps(q, _mm_movehl_ps(q, q));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
#else
  float s = 0.0f;
  for (int l = 0; l < kW; ++l) s += p[l];
  return s;
#endif
}

using ChunkFn = void (*)(const float*, int64_t, const float*, int64_t, float*);
template <int... Rs>
constexpr auto make_chunk_fns(std::integer_sequence<int, Rs...>) {
  return std::array<ChunkFn, sizeof...(Rs)>{chunk_fma<Rs + 1>...};
}
constexpr auto kChunkFns = make_chunk_fns(std::make_integer_sequence<int, kMaxR>{});

#if KVSERVE_HAS_AVX512
// F16 weights times M <= 4 activation rows straight from memory: each 16 halves widened by
// vcvtph2ps and multiplied in float, four weight rows at a time (four streams, each requested
// kF16Ahead bytes ahead into L2), nothing staged: the decode-in-L1 path's store and reload of
// every chunk cost more than the memory here. w rows: [n_out, n_in] halves; as quant_matmul.
constexpr int64_t kF16Ahead = 4096;
template <int M>
void f16_rows(const QuantMatmulArgs& a) {
  const int64_t groups = (a.n_out + kG - 1) / kG, kv = a.n_in / 16 * 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (a.n_in - kv)) - 1);
#pragma omp parallel for schedule(dynamic, 8)  // as the packed panels' (kernels/quant_kgemm_int8.cc)
  for (int64_t grp = 0; grp < groups; ++grp) {
    const int64_t j0 = grp * kG;
    const int rows = static_cast<int>(std::min<int64_t>(kG, a.n_out - j0));
    const uint8_t* w[kG];
    for (int g = 0; g < kG; ++g) w[g] = a.w + (j0 + std::min(g, rows - 1)) * a.row_bytes;
    __m512 acc[M][kG];
    for (int m = 0; m < M; ++m)
      for (int g = 0; g < kG; ++g) acc[m][g] = _mm512_setzero_ps();
    for (int64_t k = 0; k < kv; k += 16) {
      for (int g = 0; g < kG; ++g) {
        if (k % 32 == 0) _mm_prefetch(reinterpret_cast<const char*>(w[g] + 2 * k + kF16Ahead), _MM_HINT_T1);
        const __m512 wv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[g] + 2 * k)));
        for (int m = 0; m < M; ++m) acc[m][g] = _mm512_fmadd_ps(wv, _mm512_loadu_ps(a.x + m * a.n_in + k), acc[m][g]);
      }
    }
    if (tail)
      for (int g = 0; g < kG; ++g) {
        const __m512 wv = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail, w[g] + 2 * kv));
        for (int m = 0; m < M; ++m)
          acc[m][g] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(tail, a.x + m * a.n_in + kv), acc[m][g]);
      }
    for (int m = 0; m < M; ++m)
      for (int g = 0; g < rows; ++g) {
        const float s = _mm512_reduce_add_ps(acc[m][g]);
        float& out = a.y[m * a.ldy + j0 + g];
        out = a.accumulate ? out + s : s;
      }
  }
}
#endif

}  // namespace

void quant_matmul(const QuantMatmulArgs& a) {
  if (a.m == 0 || a.n_out == 0) return;
  if (a.panels && static_cast<TensorType>(a.type) == TensorType::kF16) {
    f16_panels_matmul(a);
    return;
  }
  if (a.int8_activations && int8_path_applies(a.type, a.n_in)) {
    quant_matmul_int8(a);
    return;
  }
#if KVSERVE_HAS_AVX512
  if (static_cast<TensorType>(a.type) == TensorType::kF16 && a.m <= 4) {
    switch (a.m) {
      case 1: f16_rows<1>(a); break;
      case 2: f16_rows<2>(a); break;
      case 3: f16_rows<3>(a); break;
      default: f16_rows<4>(a); break;
    }
    return;
  }
#endif
  const DecodeFn decode = decoder(a.type);
  const TensorTypeTraits& traits = tensor_type(static_cast<TensorType>(a.type));
  const int64_t groups = (a.n_out + kG - 1) / kG;
#pragma omp parallel for schedule(static)
  for (int64_t grp = 0; grp < groups; ++grp) {
    alignas(64) float wbuf[kG * kKc];
    alignas(64) float part[kSmallBatchRows * kG * kW];
    const int64_t j0 = grp * kG;
    const int rows_here = static_cast<int>(std::min<int64_t>(kG, a.n_out - j0));
    if (rows_here < kG) std::fill(wbuf, wbuf + kG * kKc, 0.0f);
    for (int64_t b0 = 0; b0 < a.m; b0 += kSmallBatchRows) {
      const int64_t rows = std::min(kSmallBatchRows, a.m - b0);
      std::fill(part, part + rows * kG * kW, 0.0f);
      for (int64_t k0 = 0; k0 < a.n_in; k0 += kKc) {
        const int64_t kc = std::min(kKc, a.n_in - k0);
        const int64_t byte0 = k0 / traits.block_size * traits.bytes_per_block;
        // The same chunk of the group kPrefetchGroups ahead, requested now: without it each thread's
        // memory stream stalls while it decodes and multiplies.
        if (grp + kPrefetchGroups < groups) {
          const int64_t chunk_bytes = kc / traits.block_size * traits.bytes_per_block;
          const int64_t ahead = std::min<int64_t>(kG, a.n_out - (grp + kPrefetchGroups) * kG);
          for (int64_t g = 0; g < ahead; ++g) {
            const uint8_t* row = a.w + ((grp + kPrefetchGroups) * kG + g) * a.row_bytes + byte0;
            for (int64_t off = 0; off < chunk_bytes; off += 64)
              __builtin_prefetch(row + off, 0, 2);
          }
        }
        for (int g = 0; g < rows_here; ++g) decode(a.w + (j0 + g) * a.row_bytes + byte0, wbuf + g * kKc, kc);
        for (int64_t r0 = 0; r0 < rows; r0 += kMaxR) {
          const int r = static_cast<int>(std::min<int64_t>(kMaxR, rows - r0));
          kChunkFns[r - 1](wbuf, kc, a.x + (b0 + r0) * a.n_in + k0, a.n_in, part + r0 * kG * kW);
        }
      }
      for (int64_t r = 0; r < rows; ++r)
        for (int g = 0; g < rows_here; ++g) {
          const float s = lane_sum(part + (r * kG + g) * kW);
          float& out = a.y[(b0 + r) * a.ldy + j0 + g];
          out = a.accumulate ? out + s : s;
        }
    }
  }
}

bool panels_apply(uint32_t type, int64_t n_in, int64_t rows) {
  if (static_cast<TensorType>(type) == TensorType::kF16) return f16_panels_apply(rows);
  return int8_panels_apply(type, n_in, rows);
}

void pack_panels(uint32_t type, uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_in) {
  if (static_cast<TensorType>(type) == TensorType::kF16)
    pack_f16_panels(w, rows, n_in);
  else
    pack_int8_panels(type, w, rows, row_bytes, n_in);
}

void dequantize_panels(uint32_t type, const uint8_t* w, int64_t rows, int64_t n_in, float* out) {
  if (static_cast<TensorType>(type) == TensorType::kF16) dequantize_f16_panels(w, rows, n_in, out);
}

void dequantize_rows(uint32_t type, const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t n_in, float* out) {
  const DecodeFn decode = decoder(type);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) decode(w + r * row_bytes, out + r * n_in, n_in);
}

}  // namespace kvserve::KVSERVE_KERNEL_NS
KVSERVE_KERNEL_TARGET_END
