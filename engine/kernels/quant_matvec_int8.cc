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
};

RoundedRow round_row(const float* x, int64_t n_in, void* scratch) {
  auto* q = static_cast<int8_t*>(scratch);
  auto* lanes = reinterpret_cast<int32_t*>(q + (n_in + 63) / 64 * 64);
  auto* d = reinterpret_cast<float*>(lanes + n_in / 4);
  const __m256i ones = _mm256_set1_epi8(1);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    d[b] = levels::round_block32(x + 32 * b, q + 32 * b);
    const __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones,
                                             _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 32 * b)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lanes + 8 * b), sums);
  }
  return {q, d, lanes};
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
// Two blocks of 32 a step, their levels from `Levels` with offset 2^kShift; or (kMin: Q4_1,
// Q5_1) no offset and each block's minimum m, whose part is m times the activations' sum.
template <typename Block, __m512i (*Levels)(const Block*), int kShift, bool kMin, int M, int R>
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
        const __m512i lanes = load64(x[m].lanes + 16 * c);
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, load64(x[m].q + 64 * c));
        if constexpr (!kMin) dot = _mm512_sub_epi32(dot, _mm512_slli_epi32(lanes, kShift));  // offset x lane sum
        acc[m][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), pair_scale(ws, x[m].d + 2 * c), acc[m][g]);
        if constexpr (kMin)
          acc[m][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes), pair_scale(pair_of_halves(b[0].m, b[1].m), x[m].d + 2 * c),
                                      acc[m][g]);
      }
    }
  }
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < R; ++g) out[m * R + g] = _mm512_reduce_add_ps(acc[m][g]);
}
template <int M, int R>
void dot_q8_0(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  dot_pairs<quant::BlockQ8_0, levels::q8_0_pair, 7, false, M, R>(w, row_bytes, x, n_in, ahead, out);
}
template <int M, int R>
void dot_q4_0(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  dot_pairs<quant::BlockQ4_0, levels::q4_0_pair, 3, false, M, R>(w, row_bytes, x, n_in, ahead, out);
}

template <int M, int R>
void dot_q5_0(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  dot_pairs<quant::BlockQ5_0, levels::q5_0_pair, 4, false, M, R>(w, row_bytes, x, n_in, ahead, out);
}
template <int M, int R>
void dot_q4_1(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  dot_pairs<quant::BlockQ4_1, levels::q4_1_pair, 0, true, M, R>(w, row_bytes, x, n_in, ahead, out);
}
template <int M, int R>
void dot_q5_1(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  dot_pairs<quant::BlockQ5_1, levels::q5_1_pair, 0, true, M, R>(w, row_bytes, x, n_in, ahead, out);
}
template <int M, int R>
void dot_iq4_nl(const uint8_t* w, int64_t row_bytes, const RoundedRow* x, int64_t n_in, const Ahead& ahead, float* out) {
  dot_pairs<quant::BlockIQ4_NL, levels::iq4_nl_pair, 7, false, M, R>(w, row_bytes, x, n_in, ahead, out);
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
                        q5_0 = KVSERVE_DOTS(dot_q5_0, 64), iq4_nl = KVSERVE_DOTS(dot_iq4_nl, 64),
                        q4_1 = KVSERVE_DOTS(dot_q4_1, 64), q5_1 = KVSERVE_DOTS(dot_q5_1, 64);
  switch (static_cast<TensorType>(type)) {
    case TensorType::kQ8_0: return &q8_0;
    case TensorType::kQ4_0: return &q4_0;
    case TensorType::kQ5_0: return &q5_0;
    case TensorType::kQ4_1: return &q4_1;
    case TensorType::kQ5_1: return &q5_1;
    case TensorType::kIQ4_NL: return &iq4_nl;
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
