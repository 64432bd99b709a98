// The integer GEMM of the 32-value block types (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4) for 5 or
// more activation rows: activations rounded per block of 32 (round_activations), weights a panel
// of 16 rows at a time with their levels transposed (kernels/int8/panel_avx512.h). Per block,
// eight vpdpbusd sum 32 products for 16 outputs of a row, the levels' offset times the block's
// activation sum comes off in integers, one multiply-add by the two block scales moves it to
// float, and for Q4_1/Q5_1 one more adds the block minimum times the activations' sum.
#include "kernels/int8/int8_matmul.h"

#include "kernels/intrinsics.h"

#include <algorithm>
#include <vector>

#include "codecs/tensor_types.h"
#include "kernels/small_batch_matmul.h"

KVSERVE_KERNEL_TARGET_BEGIN
#include "codecs/quant_decode.h"

#if KVSERVE_HAS_AVX512
KVSERVE_VNNI_TARGET_BEGIN
#include "kernels/vec/vec_int8.h"
#include "kernels/int8/block32.h"
#include "kernels/int8/panel_avx512.h"

namespace kvserve::KVSERVE_KERNEL_NS {
namespace {

using namespace panel;

using int8::Row32;

struct Panel32 {
  std::vector<IntVec> w;       // [n_in / 4]: lane i = 4 levels of row i
  std::vector<FloatVec> d, m;  // [n_in / 32]: lane i = row i's block scale (and minimum)
};

template <class T>
void unpack_panel(const uint8_t* w, int64_t row_bytes, int rows, int64_t n_in, const uint8_t* next, int next_rows,
                  Panel32& p) {
  using Block = typename T::Block;
  const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
  const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm512_set1_epi32(static_cast<int>(row_bytes)));
  for (int64_t c = 0; c < n_in / 64; ++c) {  // two blocks at a time
    const int64_t byte0 = 2 * c * static_cast<int64_t>(sizeof(Block));
    if (next)
      for (int i = 0; i < next_rows; ++i)
        for (int64_t off = 0; off < 2 * static_cast<int64_t>(sizeof(Block)); off += 64)
          _mm_prefetch(reinterpret_cast<const char*>(next + i * row_bytes + byte0 + off), _MM_HINT_T1);
    __m512i r[kPanel];
    for (int i = 0; i < kPanel; ++i)
      r[i] = i < rows ? vec::levels(reinterpret_cast<const Block*>(w + i * row_bytes + byte0)) : _mm512_setzero_si512();
    transpose16(r);
    for (int i = 0; i < kPanel; ++i) p.w[16 * c + i].v = r[i];
    for (int h = 0; h < 2; ++h) {
      // The block's F16 scale is its first two bytes: the low half of the word there; a
      // minimum, the high half.
      const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, at,
                                                        w + byte0 + h * static_cast<int64_t>(sizeof(Block)), 1);
      if constexpr (T::e8m0_scale)  // MXFP4: its first byte is the exponent
        p.d[2 * c + h].v = levels::e8m0_halves(_mm512_and_si512(words, _mm512_set1_epi32(0xFF)));
      else
        p.d[2 * c + h].v = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(words));
      if constexpr (T::has_min) p.m[2 * c + h].v = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(words, 16)));
    }
  }
}

template <class T, int R>
void tile(const Panel32& p, const Row32* x, int64_t n_in, __m512* out) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_in / 32; ++b) {
    __m512i dot[R];
    for (int r = 0; r < R; ++r) dot[r] = _mm512_setzero_si512();
    for (int t = 0; t < 8; ++t) {
      const __m512i wv = p.w[8 * b + t].v;
      for (int r = 0; r < R; ++r) dot[r] = _mm512_dpbusd_epi32(dot[r], wv, broadcast4(x[r].q + 32 * b + 4 * t));
    }
    for (int r = 0; r < R; ++r) {
      const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(dot[r], _mm512_set1_epi32(T::offset * x[r].sum[b])));
      acc[r] = _mm512_fmadd_ps(v, _mm512_mul_ps(p.d[b].v, _mm512_set1_ps(x[r].d[b])), acc[r]);
      if constexpr (T::has_min)
        acc[r] = _mm512_fmadd_ps(p.m[b].v, _mm512_set1_ps(x[r].d[b] * static_cast<float>(x[r].sum[b])), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = acc[r];
}

template <class T>
void gemm(const QuantMatmulArgs& a) {
  Row32 x[kSmallBatchRows];
  const int64_t stride = int8::row32_bytes(a.n_in);
#pragma omp parallel for schedule(static) if (a.m > 4)
  for (int64_t r = 0; r < a.m; ++r)
    x[r] = int8::round_row32(a.x + r * a.n_in, a.n_in, static_cast<uint8_t*>(a.scratch) + r * stride);
  const int64_t panels = (a.n_out + kPanel - 1) / kPanel;
#pragma omp parallel
  {
    thread_local Panel32 p;
    p.w.resize(static_cast<size_t>(a.n_in / 4));
    p.d.resize(static_cast<size_t>(a.n_in / 32));
    if (T::has_min) p.m.resize(static_cast<size_t>(a.n_in / 32));
#pragma omp for schedule(static)
    for (int64_t pi = 0; pi < panels; ++pi) {
      const int64_t j0 = pi * kPanel;
      const int rows = static_cast<int>(std::min<int64_t>(kPanel, a.n_out - j0));
      const int next_rows = static_cast<int>(std::clamp<int64_t>(a.n_out - j0 - kPanel, 0, kPanel));
      unpack_panel<T>(a.w + j0 * a.row_bytes, a.row_bytes, rows, a.n_in,
                      next_rows > 0 ? a.w + (j0 + kPanel) * a.row_bytes : nullptr, next_rows, p);
      const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
      for (int64_t r0 = 0; r0 < a.m; r0 += kTile) {
        __m512 out[kTile];
        switch (std::min<int64_t>(kTile, a.m - r0)) {
          case 1: tile<T, 1>(p, x + r0, a.n_in, out); break;
          case 2: tile<T, 2>(p, x + r0, a.n_in, out); break;
          case 3: tile<T, 3>(p, x + r0, a.n_in, out); break;
          default: tile<T, 4>(p, x + r0, a.n_in, out); break;
        }
        for (int64_t r = 0; r < std::min<int64_t>(kTile, a.m - r0); ++r) {
          float* y = a.y + (r0 + r) * a.ldy + j0;
          const __m512 v = a.accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(live, y), out[r]) : out[r];
          _mm512_mask_storeu_ps(y, live, v);
        }
      }
    }
  }
}

}  // namespace

template <class T>
void q32_gemm(const QuantMatmulArgs& a) {
  gemm<T>(a);
}
#define KVSERVE_INSTANTIATE(T) template void q32_gemm<int8_types::T>(const QuantMatmulArgs&);
KVSERVE_INT8_TYPES32(KVSERVE_INSTANTIATE)
#undef KVSERVE_INSTANTIATE

}  // namespace kvserve::KVSERVE_KERNEL_NS

KVSERVE_VNNI_TARGET_END
#endif  // levels without AVX-512: the fused kernel or the float path
KVSERVE_KERNEL_TARGET_END
