#include "kernels/quant_dot_int8.h"

#include "kernels/intrinsics.h"

#include <algorithm>
#include <cstring>
#include <bit>

#include "codecs/tensor_types.h"

KVSERVE_KERNEL_TARGET_BEGIN
#include "codecs/quant_decode.h"

KVSERVE_VNNI_TARGET_BEGIN
#include "kernels/quant_levels_avx512.h"

namespace kvserve::KVSERVE_KERNEL_NS {

#if KVSERVE_HAS_AVX512
namespace {

using levels::load32;
using levels::load64;

using levels::Row32;

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
// Two blocks of 32 a step, their levels from T (levels::Type32) with its offset; or, for the
// types with a minimum (Q4_1, Q5_1), no offset and each block's minimum m, whose part is m times
// the activations' sum.
template <class T, int M, int R>
void dot_pairs(const uint8_t* w, int64_t row_bytes, const Row32* x, int64_t n_in, const Ahead& ahead, float* out) {
  using Block = typename T::Block;
  constexpr int kShift = std::countr_zero(static_cast<uint32_t>(T::offset));  // offset = 2^kShift
  __m512 acc[M][R];
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < R; ++g) acc[m][g] = _mm512_setzero_ps();
  for (int64_t c = 0; c < n_in / 64; ++c) {
    ahead.at(c);
    for (int g = 0; g < R; ++g) {
      const Block* b = reinterpret_cast<const Block*>(w + g * row_bytes) + 2 * c;
      const __m512i q = T::levels(b);
      const __m128 ws = pair_of_halves(b[0].d, b[1].d);
      for (int m = 0; m < M; ++m) {
        const __m512i lanes = load64(x[m].lanes + 16 * c);
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, load64(x[m].q + 64 * c));
        if constexpr (!T::has_min) dot = _mm512_sub_epi32(dot, _mm512_slli_epi32(lanes, kShift));  // offset x lane sum
        acc[m][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), pair_scale(ws, x[m].d + 2 * c), acc[m][g]);
        if constexpr (T::has_min)
          acc[m][g] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(lanes), pair_scale(pair_of_halves(b[0].m, b[1].m), x[m].d + 2 * c),
                                      acc[m][g]);
      }
    }
  }
  for (int m = 0; m < M; ++m)
    for (int g = 0; g < R; ++g) out[m * R + g] = _mm512_reduce_add_ps(acc[m][g]);
}
constexpr int kRows = 4;             // weight rows sharing each load of the activations
constexpr int kActivationRows = 2;   // activation rows sharing each unpacked weight
constexpr int64_t kAheadGroups = 2;  // prefetch distance, in groups of rows

using DotFn = void (*)(const uint8_t*, int64_t, const Row32*, int64_t, const Ahead&, float*);
struct TypeDots {
  DotFn fns[kActivationRows][kRows];  // fns[m - 1][r - 1] takes m activation rows and r weight rows
};
template <class T>
const TypeDots* dots_of() {
  static const TypeDots d{{{dot_pairs<T, 1, 1>, dot_pairs<T, 1, 2>, dot_pairs<T, 1, 3>, dot_pairs<T, 1, 4>},
                           {dot_pairs<T, 2, 1>, dot_pairs<T, 2, 2>, dot_pairs<T, 2, 3>, dot_pairs<T, 2, 4>}}};
  return &d;
}
const TypeDots* dots_for(uint32_t type) {
  const TypeDots* d = nullptr;
  levels::with_type32(type, [&](auto t) { d = dots_of<decltype(t)>(); });
  return d;
}

}  // namespace

void quant_matvec_int8(const QuantMatmulArgs& a) {
  const TypeDots& dots = *dots_for(a.type);
  Row32 x[kFusedMaxRows];
  for (int64_t r = 0; r < a.m; ++r)
    x[r] = levels::round_row32(a.x + r * a.n_in, a.n_in, static_cast<uint8_t*>(a.scratch) + r * levels::row32_bytes(a.n_in));
  const int64_t groups = (a.n_out + kRows - 1) / kRows, steps = a.n_in / 64;
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
void quant_matvec_int8(const QuantMatmulArgs&) {}
#endif

}  // namespace kvserve::KVSERVE_KERNEL_NS

KVSERVE_VNNI_TARGET_END
KVSERVE_KERNEL_TARGET_END
