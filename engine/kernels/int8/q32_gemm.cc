// The integer GEMM of the 32-value block types (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, MXFP4) for 5 or
// more activation rows (MXFP4 from 3): activations rounded per block of 32 (round_activations),
// weights two panels of 16 rows at a time with their levels transposed (kernels/int8/panel_avx512.h). Per block,
// eight vpdpbusd sum 32 products for 16 outputs of a row, the levels' offset times the block's
// activation sum comes off in integers, one multiply-add by the two block scales moves it to
// float, and for Q4_1/Q5_1 one more adds the block minimum times the activations' sum.
#include "kernels/int8/int8_matmul.h"

#include "kernels/intrinsics.h"

#include <algorithm>
#include <cstddef>
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

// The 4-bit types without a fifth bit (Q4_0, Q4_1, IQ4_NL, MXFP4): one block's codes of the 16
// rows (16 bytes each) transposed as they are stored, four dwords a row, and split into nibbles
// after: a quarter of the shuffles of transposing the unpacked levels (transpose16), which took
// as long as the products themselves where an expert sees a few rows. Codes dword j holds
// values 4j..4j+3 in its low nibbles and 16+4j.. in its high ones: steps j and 4 + j.
template <class T, bool kFull>
inline void unpack_codes(const uint8_t* w, int64_t row_bytes, int rows, int64_t b, IntVec* steps) {
  using Block = typename T::Block;
  const int64_t at = b * static_cast<int64_t>(sizeof(Block)) + static_cast<int64_t>(offsetof(Block, qs));
  __m512i z[4];  // z[k] 128-bit lane L: row 4k + L's 16 bytes
  for (int k = 0; k < 4; ++k) {
    __m512i v = _mm512_setzero_si512();
    for (int l = 0; l < 4; ++l) {
      const int i = 4 * k + l;
      if (kFull || i < rows) v = _mm512_inserti32x4(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i * row_bytes + at)), l);
    }
    z[k] = v;
  }
  // Dwords 0-1 (lo) and 2-3 (hi) of rows 0-7 and of rows 8-15, each dword's 8 rows in a 256-bit half.
  const __m512i lo = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
  const __m512i hi = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
  const __m512i a0 = _mm512_permutex2var_epi32(z[0], lo, z[1]), a1 = _mm512_permutex2var_epi32(z[0], hi, z[1]);
  const __m512i b0 = _mm512_permutex2var_epi32(z[2], lo, z[3]), b1 = _mm512_permutex2var_epi32(z[2], hi, z[3]);
  const __m512i dw[4] = {_mm512_shuffle_i64x2(a0, b0, 0x44), _mm512_shuffle_i64x2(a0, b0, 0xEE),
                         _mm512_shuffle_i64x2(a1, b1, 0x44), _mm512_shuffle_i64x2(a1, b1, 0xEE)};
  const __m512i nib = _mm512_set1_epi8(0x0F);
  for (int j = 0; j < 4; ++j) {
    __m512i low = _mm512_and_si512(dw[j], nib), high = _mm512_and_si512(_mm512_srli_epi16(dw[j], 4), nib);
    if constexpr (T::lookup) {
      const __m512i lut = _mm512_broadcast_i32x4(levels::lookup_table(T::table, T::offset));
      low = _mm512_shuffle_epi8(lut, low);
      high = _mm512_shuffle_epi8(lut, high);
    }
    steps[j].v = low;
    steps[4 + j].v = high;
  }
}

template <class T>
void unpack_panel(const uint8_t* w, int64_t row_bytes, int rows, int64_t n_in, const uint8_t* next, int next_rows,
                  Panel32& p) {
  using Block = typename T::Block;
  constexpr bool kCodes = T::bits == 4;
  const __mmask16 live = static_cast<__mmask16>((1u << rows) - 1);
  const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                        _mm512_set1_epi32(static_cast<int>(row_bytes)));
  for (int64_t c = 0; c < n_in / 64; ++c) {  // two blocks at a time
    const int64_t byte0 = 2 * c * static_cast<int64_t>(sizeof(Block));
    if (next)
      for (int i = 0; i < next_rows; ++i)
        for (int64_t off = 0; off < 2 * static_cast<int64_t>(sizeof(Block)); off += 64)
          _mm_prefetch(reinterpret_cast<const char*>(next + i * row_bytes + byte0 + off), _MM_HINT_T1);
    if constexpr (kCodes) {
      // A full panel without the per-row tests, which took a tenth of the unpacking.
      for (int h = 0; h < 2; ++h)
        if (rows == kPanel)
          unpack_codes<T, true>(w, row_bytes, rows, 2 * c + h, &p.w[16 * c + 8 * h]);
        else
          unpack_codes<T, false>(w, row_bytes, rows, 2 * c + h, &p.w[16 * c + 8 * h]);
    } else {
      __m512i r[kPanel];
      for (int i = 0; i < kPanel; ++i)
        r[i] = i < rows ? vec::levels(reinterpret_cast<const Block*>(w + i * row_bytes + byte0)) : _mm512_setzero_si512();
      transpose16(r);
      for (int i = 0; i < kPanel; ++i) p.w[16 * c + i].v = r[i];
    }
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

// R activation rows times P unpacked panels: out[q * R + r] lane i = output of row i of panel
// q. Two panels at a time load each activation broadcast once for both: a vpdpbusd with its
// own broadcast load each left the loads, not the multiplies, the bound.
template <class T, int R, int P>
void tile(const Panel32* const* ps, const Row32* x, int64_t n_in, __m512* out) {
  __m512 acc[P][R];
  for (int q = 0; q < P; ++q)
    for (int r = 0; r < R; ++r) acc[q][r] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_in / 32; ++b) {
    __m512i dot[P][R];
    for (int q = 0; q < P; ++q)
      for (int r = 0; r < R; ++r) dot[q][r] = _mm512_setzero_si512();
    for (int t = 0; t < 8; ++t) {
      __m512i xb[R];
      for (int r = 0; r < R; ++r) xb[r] = broadcast4(x[r].q + 32 * b + 4 * t);
      for (int q = 0; q < P; ++q) {
        const __m512i wv = ps[q]->w[8 * b + t].v;
        for (int r = 0; r < R; ++r) dot[q][r] = _mm512_dpbusd_epi32(dot[q][r], wv, xb[r]);
      }
    }
    for (int q = 0; q < P; ++q)
      for (int r = 0; r < R; ++r) {
        const __m512 v = _mm512_cvtepi32_ps(_mm512_sub_epi32(dot[q][r], _mm512_set1_epi32(T::offset * x[r].sum[b])));
        acc[q][r] = _mm512_fmadd_ps(v, _mm512_mul_ps(ps[q]->d[b].v, _mm512_set1_ps(x[r].d[b])), acc[q][r]);
        if constexpr (T::has_min)
          acc[q][r] = _mm512_fmadd_ps(ps[q]->m[b].v, _mm512_set1_ps(x[r].d[b] * static_cast<float>(x[r].sum[b])), acc[q][r]);
      }
  }
  for (int q = 0; q < P; ++q)
    for (int r = 0; r < R; ++r) out[q * R + r] = acc[q][r];
}

template <class T, int P>
void tiles(const Panel32* const* ps, const Row32* x, int64_t rows, int64_t n_in, __m512* out) {
  switch (rows) {
    case 1: tile<T, 1, P>(ps, x, n_in, out); break;
    case 2: tile<T, 2, P>(ps, x, n_in, out); break;
    case 3: tile<T, 3, P>(ps, x, n_in, out); break;
    default: tile<T, 4, P>(ps, x, n_in, out); break;
  }
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
    thread_local Panel32 held[2];
    for (Panel32& p : held) {
      p.w.resize(static_cast<size_t>(a.n_in / 4));
      p.d.resize(static_cast<size_t>(a.n_in / 32));
      if (T::has_min) p.m.resize(static_cast<size_t>(a.n_in / 32));
    }
    const Panel32* ps[2] = {&held[0], &held[1]};
#pragma omp for schedule(static)
    for (int64_t pp = 0; pp < (panels + 1) / 2; ++pp) {
      const int64_t j0 = 2 * pp * kPanel;
      const int np = 2 * pp + 1 < panels ? 2 : 1;
      int rows[2];
      for (int q = 0; q < np; ++q) {
        const int64_t jq = j0 + q * kPanel;
        rows[q] = static_cast<int>(std::min<int64_t>(kPanel, a.n_out - jq));
        const int next_rows = static_cast<int>(std::clamp<int64_t>(a.n_out - jq - kPanel, 0, kPanel));
        unpack_panel<T>(a.w + jq * a.row_bytes, a.row_bytes, rows[q], a.n_in,
                        next_rows > 0 ? a.w + (jq + kPanel) * a.row_bytes : nullptr, next_rows, held[q]);
      }
      for (int64_t r0 = 0; r0 < a.m; r0 += kTile) {
        const int64_t mr = std::min<int64_t>(kTile, a.m - r0);
        __m512 out[2 * kTile];
        if (np == 2)
          tiles<T, 2>(ps, x + r0, mr, a.n_in, out);
        else
          tiles<T, 1>(ps, x + r0, mr, a.n_in, out);
        for (int q = 0; q < np; ++q) {
          const __mmask16 live = static_cast<__mmask16>((1u << rows[q]) - 1);
          for (int64_t r = 0; r < mr; ++r) {
            float* y = a.y + (r0 + r) * a.ldy + j0 + q * kPanel;
            const __m512 v = a.accumulate ? _mm512_add_ps(_mm512_maskz_loadu_ps(live, y), out[q * mr + r]) : out[q * mr + r];
            _mm512_mask_storeu_ps(y, live, v);
          }
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
