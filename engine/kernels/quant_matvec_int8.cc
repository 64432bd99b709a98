#include "kernels/quant_dot_int8.h"

// GCC 12 warns inside its own AVX-512 header (_mm512_undefined_ps is self-initialised).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "gguf/tensor_types.h"

#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

KVSERVE_KERNEL_TARGET_BEGIN
#include "kernels/quant_decode.h"

#if KVSERVE_HAS_AVX512
_Pragma("GCC push_options") _Pragma("GCC target(\"avx512vnni\")")
#endif
#include "kernels/quant_levels_avx512.h"

namespace kvserve::KVSERVE_KERNEL_NS {

#if KVSERVE_HAS_AVX512
namespace {

using levels::load32;
using levels::load64;

// One activation row rounded as round_activations rounds it, with what the fused dots need.
struct RoundedRow {
  const int8_t* q;         // [n_in] levels
  const float* d;          // [n_in / 32] block scales
  const int32_t* lanes;    // [n_in / 4] sums of each 4 levels (one vpdpbusd lane)
  const float* d_sum;      // [n_in / 32] block scale x sum of the block's levels
};

RoundedRow round_row(const float* x, int64_t n_in, void* scratch) {
  auto* q = static_cast<int8_t*>(scratch);
  auto* lanes = reinterpret_cast<int32_t*>(q + (n_in + 63) / 64 * 64);
  auto* d = reinterpret_cast<float*>(lanes + n_in / 4);
  float* d_sum = d + n_in / 32;
  const __m256i ones = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const float db = levels::round_block32(x + 32 * b, q + 32 * b);
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones,
                                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * b)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes + 8 * b), sums);
    const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sums), _mm256_extracti128_si256(sums, 1));
    const __m128i s2 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
    const int32_t total = _mm_cvtsi128_si32(_mm_add_epi32(s2, _mm_shuffle_epi32(s2, _MM_SHUFFLE(2, 3, 0, 1))));
    d[b] = db;
    d_sum[b] = db * static_cast<float>(total);
  }
  return {q, d, lanes, d_sum};
}

// Two blocks' F16 scales as floats in lanes 0 and 1.
inline __m128 pair_of_halves(uint16_t a, uint16_t b) {
  return _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(a), b, 1));
}
// w (two block scales) times the activations' two block scales, each spread over 8 lanes.
inline __m512 pair_scale(__m128 w, const float* xd) {
  const __m128 s = _mm_mul_ps(w, _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(xd))));
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
                               _mm512_castps128_ps512(s));
}

// Spreads the prefetches of the next-but-one group of rows evenly over this group's steps, so
// the memory stream runs under the arithmetic without a burst that fills the miss buffers.
struct Ahead {
  const char* p = nullptr;
  int64_t per_step = 0;  // bytes
  void at(int64_t step) const {
    if (!p) return;
    for (int64_t off = step * per_step; off < (step + 1) * per_step; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
  }
};

// R rows of W (row_bytes apart) times M rounded rows x[0..M): out[m * R + g]. Per type, values 64
// at a time: the integer dot of each 4 levels (vpdpbusd), less the levels' offset times the
// activations' lane sum, to float, times the product of the two block scales. Each weight is
// unpacked once for all M rows.
// Q8_0 and Q4_0: two blocks of 32 a step, their levels from `Levels` with offset 2^kShift.
template <typename Block, __m512i (*Levels)(const Block*), int kShift, int M, int R>
void dot_pairs(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  __m512 acc[M][R];
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < R; ++g) acc[m][g] = _mm512_setzero_ps();
  for (int64_t c = 0; c < n_in / 64; ++c) {
    ahead.at(c);
    for (int g = 0; g < R; ++g) {
      const Block* b = reinterpret_cast<const Block*>(w + g * row_bytes) + 2 * c;
      const __m512i q = Levels(b);
      const __m128 ws = pair_of_halves(b[0].d, b[1].d);
      for (int m = 0; m < M; ++m) {
        const __m512i offset = _mm512_slli_epi32(load64(x[m].lanes + 16 * c), kShift);  // offset x lane sum
        const __m512i dot = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, load64(x[m].q + 64 * c)), offset);
        acc[m][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), pair_scale(ws, x[m].d + 2 * c), acc[m][g]);
      }
    }
  }
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < R; ++g) out[m * R + g] = _mm512_reduce_add_ps(acc[m][g]);
}
template <int M, int R>
void dot_q8_0(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  dot_pairs<quant::BlockQ8_0, levels::q8_0_pair, 7, M, R>(w, row_bytes, x, n_in, ahead, out);
}
template <int M, int R>
void dot_q4_0(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  dot_pairs<quant::BlockQ4_0, levels::q4_0_pair, 3, M, R>(w, row_bytes, x, n_in, ahead, out);
}

template <int M, int R>
void dot_iq4_nl(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  dot_pairs<quant::BlockIQ4_NL, levels::iq4_nl_pair, 7, M, R>(w, row_bytes, x, n_in, ahead, out);
}

inline float reduce8(__m256 v) {
  const __m128 m4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 m2 = _mm_add_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_add_ss(m2, _mm_movehdup_ps(m2)));
}

// Q4_K and Q5_K: value = d·scale·q - dmin·min per 32 values (Q5_K's fifth bit from qh); the
// minimums' part is the activations' block sums times dmin·min, gathered 8 sub-blocks at a time.
template <bool kFifthBit, int M, int R>
void dot_k4(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  using Block = std::conditional_t<kFifthBit, quant::BlockQ5_K, quant::BlockQ4_K>;
  __m512 acc[M][R];
  __m256 acc_min[M][R];
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < R; ++g) acc[m][g] = _mm512_setzero_ps(), acc_min[m][g] = _mm256_setzero_ps();
  for (int64_t k = 0; k < n_in / 256; ++k) {
    ahead.at(k);
    for (int g = 0; g < R; ++g) {
      const auto* b = reinterpret_cast<const Block*>(w + g * row_bytes) + k;
      uint32_t sw[4], dd;
      levels::k4_scale_words(b->scales, sw);
      std::memcpy(&dd, &b->d, 4);  // d, dmin
      const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dd)));
      const __m256 sc = _mm256_mul_ps(
          _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(sw[1]), static_cast<int>(sw[0])))),
          _mm256_broadcastss_ps(dm));
      const __m256 mn = _mm256_mul_ps(
          _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(sw[3]), static_cast<int>(sw[2])))),
          _mm256_broadcastss_ps(_mm_movehdup_ps(dm)));
      __m512 s8[M];
      for (int m = 0; m < M; ++m) {
        acc_min[m][g] = _mm256_fmadd_ps(mn, _mm256_loadu_ps(x[m].d_sum + 8 * k), acc_min[m][g]);
        s8[m] = _mm512_castps256_ps512(_mm256_mul_ps(sc, _mm256_loadu_ps(x[m].d + 8 * k)));
      }
      __m256i h = _mm256_setzero_si256();
      if constexpr (kFifthBit) h = load32(b->qh);
      for (int j = 0; j < 4; ++j) {
        const __m512i q = levels::k4_chunk<kFifthBit>(b->qs, h, j);
        const __m512i pick = _mm512_inserti64x4(_mm512_set1_epi32(2 * j), _mm256_set1_epi32(2 * j + 1), 1);
        for (int m = 0; m < M; ++m) {
          const __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, load64(x[m].q + 256 * k + 64 * j));
          acc[m][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(pick, s8[m]), acc[m][g]);
        }
      }
    }
  }
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < R; ++g) out[m * R + g] = _mm512_reduce_add_ps(acc[m][g]) - reduce8(acc_min[m][g]);
}
template <int M, int R>
void dot_q4_k(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  dot_k4<false, M, R>(w, row_bytes, x, n_in, ahead, out);
}
template <int M, int R>
void dot_q5_k(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  dot_k4<true, M, R>(w, row_bytes, x, n_in, ahead, out);
}

// Q6_K: value = d·scale·(q - 32), a scale per 16 values.
template <int M, int R>
void dot_q6_k(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  __m512 acc[M][R];
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < R; ++g) acc[m][g] = _mm512_setzero_ps();
  const __m512i halves = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
  for (int64_t k = 0; k < n_in / 256; ++k) {
    ahead.at(k);
    // The activations' scale of each 16 values' block.
    __m512 xd16[M];
    for (int m = 0; m < M; ++m)
      xd16[m] = _mm512_permutexvar_ps(halves, _mm512_castps256_ps512(_mm256_loadu_ps(x[m].d + 8 * k)));
    for (int g = 0; g < R; ++g) {
      const auto* b = reinterpret_cast<const quant::BlockQ6_K*>(w + g * row_bytes) + k;
      const __m512 scales = _mm512_mul_ps(
          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->scales)))),
          _mm512_set1_ps(quant::half_to_float(b->d)));
      __m512 s16[M];
      for (int m = 0; m < M; ++m) s16[m] = _mm512_mul_ps(scales, xd16[m]);
      for (int j = 0; j < 4; ++j) {
        const __m512i q = levels::q6_k_chunk(b, j);
        const __m512i pick = _mm512_add_epi32(_mm512_set1_epi32(4 * j),
                                              _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
        for (int m = 0; m < M; ++m) {
          const __m512i offset = _mm512_slli_epi32(load64(x[m].lanes + 64 * k + 16 * j), 5);  // 32 x lane sum
          const __m512i dot =
              _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), q, load64(x[m].q + 256 * k + 64 * j)), offset);
          acc[m][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(pick, s16[m]), acc[m][g]);
        }
      }
    }
  }
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < R; ++g) out[m * R + g] = _mm512_reduce_add_ps(acc[m][g]);
}

constexpr int kRows = 4;             // weight rows sharing each load of the activations
constexpr int kActivationRows = 2;   // activation rows sharing each unpacked weight
constexpr int64_t kAheadGroups = 2;  // prefetch distance, in groups of rows

using DotFn = void (*)(const uint8_t*, int64_t, const RoundedRow*, int64_t, const Ahead&, float*);
struct TypeDots {
  DotFn fns[kActivationRows][kRows];  // fns[m - 1][r - 1] takes m activation rows and r weight rows
  int64_t step_values;
};
#define KVSERVE_DOTS(fn, step) \
  TypeDots{{{fn<1, 1>, fn<1, 2>, fn<1, 3>, fn<1, 4>}, {fn<2, 1>, fn<2, 2>, fn<2, 3>, fn<2, 4>}}, step}

const TypeDots* dots_for(uint32_t type) {
  static const TypeDots q8_0 = KVSERVE_DOTS(dot_q8_0, 64), q4_0 = KVSERVE_DOTS(dot_q4_0, 64),
                        iq4_nl = KVSERVE_DOTS(dot_iq4_nl, 64),
                        q4_k = KVSERVE_DOTS(dot_q4_k, 256), q5_k = KVSERVE_DOTS(dot_q5_k, 256),
                        q6_k = KVSERVE_DOTS(dot_q6_k, 256);
  switch (static_cast<TensorType>(type)) {
    case TensorType::kQ8_0: return &q8_0;
    case TensorType::kQ4_0: return &q4_0;
    case TensorType::kIQ4_NL: return &iq4_nl;
    case TensorType::kQ4_K: return &q4_k;
    case TensorType::kQ5_K: return &q5_k;
    case TensorType::kQ6_K: return &q6_k;
    default: return nullptr;
  }
}
#undef KVSERVE_DOTS

}  // namespace

bool int8_matvec_applies(uint32_t type, int64_t n_in) {
  const TypeDots* d = dots_for(type);
  return d && n_in % d->step_values == 0;
}

void quant_matvec_int8(const QuantMatmulArgs& a) {
  const TypeDots& dots = *dots_for(a.type);
  // Each row's rounding in its own 64-byte-aligned part of the scratch.
  const int64_t stride = ((a.n_in + 63) / 64 * 64 + a.n_in + a.n_in / 4 + 63) / 64 * 64;
  RoundedRow x[kMatvecMaxRows];
  for (int64_t r = 0; r < a.m; ++r)
    x[r] = round_row(a.x + r * a.n_in, a.n_in, static_cast<uint8_t*>(a.scratch) + r * stride);
  const int64_t groups = (a.n_out + kRows - 1) / kRows, steps = a.n_in / dots.step_values;
  const int64_t group_bytes = kRows * a.row_bytes;
  const int64_t per_step = ((group_bytes + steps - 1) / steps + 63) / 64 * 64;
#pragma omp parallel for schedule(static)
  for (int64_t grp = 0; grp < groups; ++grp) {
    const int64_t j0 = grp * kRows;
    const int rows = static_cast<int>(std::min<int64_t>(kRows, a.n_out - j0));
    Ahead ahead;
    if (grp + kAheadGroups < groups) {
      ahead.p = reinterpret_cast<const char*>(a.w + (grp + kAheadGroups) * group_bytes);
      ahead.per_step = per_step;
    }
    // Activation rows two at a time; the group's weights are in L1 for the second pass.
    for (int64_t r0 = 0; r0 < a.m; r0 += kActivationRows) {
      const int mr = static_cast<int>(std::min<int64_t>(kActivationRows, a.m - r0));
      float out[kActivationRows * kRows];
      dots.fns[mr - 1][rows - 1](a.w + j0 * a.row_bytes, a.row_bytes, x + r0, a.n_in, r0 == 0 ? ahead : Ahead{}, out);
      for (int m = 0; m < mr; ++m) {
        float* y = a.y + (r0 + m) * a.ldy + j0;
        for (int g = 0; g < rows; ++g) y[g] = a.accumulate ? y[g] + out[m * rows + g] : out[m * rows + g];
      }
    }
  }
}

#else   // levels without AVX-512: the float path always
bool int8_matvec_applies(uint32_t, int64_t) { return false; }
void quant_matvec_int8(const QuantMatmulArgs&) {}
#endif

}  // namespace kvserve::KVSERVE_KERNEL_NS

#if KVSERVE_HAS_AVX512
_Pragma("GCC pop_options")
#endif
KVSERVE_KERNEL_TARGET_END
