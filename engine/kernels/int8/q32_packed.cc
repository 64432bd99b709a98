// The 32-value block types (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL) held as packed panels: each 16
// rows' bytes rewritten once at load, in place and to the same size, into the order the integer
// product reads them (lane i of every vector belongs to row i, as in the panel GEMM of
// kernels/int8/q32_gemm.cc), so that a product at any height streams each panel front to
// back and spends a few instructions per 64 bytes: a decode step then runs at the memory's read
// rate, which the row-major kernels (several instructions per block and row) do not reach.
//
// A panel of 16 rows and nb = n_in / 32 blocks, in order:
//   levels  per block, 8-bit types 8 vectors (vector t: lane i = row i's levels 4t..4t+3, as the
//           type's levels() gives them; IQ4_NL its indices), 4/5-bit types 4 vectors (vector u:
//           step 2u in the low nibbles, step 2u + 1 in the high);
//   masks   5-bit types: per block 8 words of 64 bits, bit 4i + j of word t the fifth bit of
//           level j of row i in step t;
//   scales  per block the 16 rows' F16 scales; then, for Q4_1/Q5_1, their F16 minimums.
#include "kernels/int8/int8_matmul.h"

#include "kernels/intrinsics.h"

#include <algorithm>
#include <cstring>
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

// Where each part of a panel starts (offsets in bytes from the panel's first).
struct Layout32 {
  int64_t masks, scales, mins;
};
template <class T>
Layout32 layout32(int64_t n_in) {
  const int64_t nb = n_in / 32, levels = nb * (T::bits == 8 ? 512 : 256);
  const int64_t masks = levels, scales = masks + (T::bits == 5 ? nb * 64 : 0);
  return {masks, scales, scales + nb * 32};
}

// Levels of two blocks in value order, as stored: the type's levels, a lookup type's indices.
template <class T>
__m512i stored_levels(const typename T::Block* b) {
  if constexpr (T::lookup)
    return levels::q4_0_pair(reinterpret_cast<const quant::BlockQ4_0*>(b));
  else
    return vec::levels(b);
}

template <class T>
void pack_panel(uint8_t* w, int64_t row_bytes, int64_t n_in, std::vector<IntVec>& steps, std::vector<uint16_t>& d,
                std::vector<uint16_t>& mins) {
  using Block = typename T::Block;
  const int64_t nb = n_in / 32;
  steps.resize(static_cast<size_t>(n_in / 4));
  d.resize(static_cast<size_t>(16 * nb));
  mins.resize(static_cast<size_t>(16 * nb));
  for (int64_t c = 0; c < nb / 2; ++c) {
    __m512i r[kPanel];
    for (int i = 0; i < kPanel; ++i) r[i] = stored_levels<T>(reinterpret_cast<const Block*>(w + i * row_bytes) + 2 * c);
    transpose16(r);
    for (int i = 0; i < kPanel; ++i) steps[16 * c + i].v = r[i];
  }
  for (int i = 0; i < kPanel; ++i)
    for (int64_t b = 0; b < nb; ++b) {
      const Block& blk = reinterpret_cast<const Block*>(w + i * row_bytes)[b];
      d[16 * b + i] = blk.d;
      if constexpr (T::has_min) mins[16 * b + i] = blk.m;
    }
  // Everything is read: the panel's bytes are free to overwrite.
  const Layout32 at = layout32<T>(n_in);
  const __m512i nib = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < nb; ++b) {
    const __m512i* s = &steps[8 * b].v;
    if constexpr (T::bits == 8) {
      for (int t = 0; t < 8; ++t) _mm512_storeu_si512(w + 64 * (8 * b + t), s[t]);
    } else {
      for (int u = 0; u < 4; ++u)
        _mm512_storeu_si512(w + 64 * (4 * b + u), _mm512_or_si512(_mm512_and_si512(s[2 * u], nib),
                                                                  _mm512_slli_epi16(_mm512_and_si512(s[2 * u + 1], nib), 4)));
    }
    if constexpr (T::bits == 5)
      for (int t = 0; t < 8; ++t) {
        const uint64_t bits = _mm512_test_epi8_mask(s[t], _mm512_set1_epi8(0x10));
        std::memcpy(w + at.masks + 8 * (8 * b + t), &bits, 8);
      }
  }
  std::memcpy(w + at.scales, d.data(), static_cast<size_t>(32 * nb));
  if constexpr (T::has_min) std::memcpy(w + at.mins, mins.data(), static_cast<size_t>(32 * nb));
}

// Steps 2u and 2u + 1 of block b of the panel at p (levels ready for vpdpbusd); ahead: the
// panel's streams requested kPanelAhead ahead.
template <class T>
inline void step_pair(const uint8_t* p, const Layout32& lay, int64_t b, int u, bool ahead, __m512i& w0, __m512i& w1) {
  if constexpr (T::bits == 8) {
    const uint8_t* at = p + 64 * (8 * b + 2 * u);
    if (ahead) {
      prefetch_l2(at + kPanelAhead);
      prefetch_l2(at + kPanelAhead + 64);
    }
    w0 = levels::load64(at);
    w1 = levels::load64(at + 64);
  } else {
    const __m512i nib = _mm512_set1_epi8(0x0F);
    const uint8_t* at = p + 64 * (4 * b + u);
    if (ahead) prefetch_l2(at + kPanelAhead);
    const __m512i v = levels::load64(at);
    w0 = _mm512_and_si512(v, nib);
    w1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
    if constexpr (T::bits == 5) {
      const __m512i fifth = _mm512_set1_epi8(0x10);
      uint64_t m0, m1;
      if (ahead && u == 0) prefetch_l2(p + lay.masks + 64 * b + kPanelAhead / 4);
      std::memcpy(&m0, p + lay.masks + 8 * (8 * b + 2 * u), 8);
      std::memcpy(&m1, p + lay.masks + 8 * (8 * b + 2 * u + 1), 8);
      w0 = _mm512_mask_add_epi8(w0, m0, w0, fifth);
      w1 = _mm512_mask_add_epi8(w1, m1, w1, fifth);
    }
    if constexpr (T::lookup) {
      const __m512i lut = _mm512_broadcast_i32x4(levels::lookup_table(T::table, T::offset));
      w0 = _mm512_shuffle_epi8(lut, w0);
      w1 = _mm512_shuffle_epi8(lut, w1);
    }
  }
}

// R activation rows times P packed panels (ps[0..P)): out[p * R + r] lane i = output of row i
// of panel p. Several panels at once give few rows several streams through memory, which the
// hardware prefetchers serve faster than one. ahead: request each stream's lines ahead; next:
// bytes to request into L2 meanwhile, a slice a pair of steps (the next group of panels).
template <class T, int R, int P>
void tile(const uint8_t* const* ps, const Layout32& lay, int64_t n_in, const Row32* x, __m512* out, bool ahead = true,
          const uint8_t* next = nullptr, int64_t next_bytes = 0) {
  __m512 acc[P][R];
  for (int p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r) acc[p][r] = _mm512_setzero_ps();
  LineRequests requests(next, next_bytes, n_in / 8);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    __m512i dot[P][R], dot1[P][R];  // two chains (dot_pair)
    for (int p = 0; p < P; ++p)
      for (int r = 0; r < R; ++r) dot[p][r] = dot1[p][r] = _mm512_setzero_si512();
    for (int u = 0; u < 4; ++u) {
      if (next) requests.next();
      dot_pair<R, P>(
          x, 32 * b + 8 * u, [&](int p, __m512i& w0, __m512i& w1) { step_pair<T>(ps[p], lay, b, u, ahead, w0, w1); },
          dot, dot1);
    }
    for (int p = 0; p < P; ++p) {
      // Scales are 32 bytes a block: one line every second block.
      if (ahead && b % 2 == 0) prefetch_l2(ps[p] + lay.scales + 32 * b + kPanelAhead / (T::bits == 8 ? 16 : 8));
      const __m512 d = _mm512_cvtph_ps(levels::load32(ps[p] + lay.scales + 32 * b));
      for (int r = 0; r < R; ++r) {
        const __m512i sum = _mm512_sub_epi32(_mm512_add_epi32(dot[p][r], dot1[p][r]), _mm512_set1_epi32(T::offset * x[r].sum[b]));
        acc[p][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(x[r].d[b])), acc[p][r]);
      }
      if constexpr (T::has_min) {
        if (ahead && b % 2 == 0) prefetch_l2(ps[p] + lay.mins + 32 * b + kPanelAhead / 8);
        const __m512 mn = _mm512_cvtph_ps(levels::load32(ps[p] + lay.mins + 32 * b));
        for (int r = 0; r < R; ++r)
          acc[p][r] = _mm512_fmadd_ps(mn, _mm512_set1_ps(x[r].d[b] * static_cast<float>(x[r].sum[b])), acc[p][r]);
      }
    }
  }
  for (int p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r) out[p * R + r] = acc[p][r];
}

// Rows [r0, r0 + R) of x over the matrix, P panels at a time (the last few one at a time), each
// group's bytes requested while the one before it runs (claim_groups); each stream requests
// lines ahead only where nothing requested the group before.
template <class T, int R, int P>
void rows_over_panels(const QuantMatmulArgs& a, const Row32* x, int64_t r0, const Layout32& lay) {
  const int64_t panels = a.n_out / kPanel, panel_bytes = kPanel * a.row_bytes;
  claim_groups(a.w, panels * panel_bytes, P * panel_bytes,
               [&](int64_t g, const uint8_t* next_w, int64_t next_bytes, bool ahead) {
    const int64_t p0 = g * P;
    __m512 out[P * R];
    const uint8_t* ps[P];
    for (int p = 0; p < P; ++p) ps[p] = a.w + std::min(p0 + p, panels - 1) * panel_bytes;
    if (p0 + P <= panels)
      tile<T, R, P>(ps, lay, a.n_in, x + r0, out, ahead, next_w, next_bytes);
    else
      for (int64_t p = p0; p < panels; ++p) tile<T, R, 1>(&ps[p - p0], lay, a.n_in, x + r0, out + (p - p0) * R);
    for (int64_t p = p0; p < std::min(panels, p0 + P); ++p)
      for (int r = 0; r < R; ++r) {
        float* y = a.y + (r0 + r) * a.ldy + p * kPanel;
        const __m512 v = out[(p - p0) * R + r];
        _mm512_storeu_ps(y, a.accumulate ? _mm512_add_ps(_mm512_loadu_ps(y), v) : v);
      }
  }, a.then, a.then_bytes);
}

// tile() at a height of `rows` (1..kTile) activation rows.
template <class T, int P>
void row_tiles(const uint8_t* const* ps, const Layout32& lay, int64_t n_in, const Row32* x, int64_t rows, __m512* out) {
  switch (rows) {
    case 1: tile<T, 1, P>(ps, lay, n_in, x, out); break;
    case 2: tile<T, 2, P>(ps, lay, n_in, x, out); break;
    case 3: tile<T, 3, P>(ps, lay, n_in, x, out); break;
    default: tile<T, 4, P>(ps, lay, n_in, x, out); break;
  }
}

template <class T>
void product(const QuantMatmulArgs& a) {
  Row32 x[kSmallBatchRows];
  const int64_t stride = int8::row32_bytes(a.n_in);
#pragma omp parallel for schedule(static) if (a.m > 4)
  for (int64_t r = 0; r < a.m; ++r)
    x[r] = int8::round_row32(a.x + r * a.n_in, a.n_in, static_cast<uint8_t*>(a.scratch) + r * stride);
  const Layout32 lay = layout32<T>(a.n_in);
  // One row over 4 panels at a time, two over 2; more rows 4 at a time over each pair of
  // panels while they are in cache (a pair loads each activation broadcast once for both).
  if (a.m == 1) return rows_over_panels<T, 1, 4>(a, x, 0, lay);
  if (a.m == 2) return rows_over_panels<T, 2, 2>(a, x, 0, lay);
  const int64_t panel_bytes = kPanel * a.row_bytes;
  const int64_t panels = a.n_out / kPanel;
#pragma omp parallel for schedule(static)
  for (int64_t pp = 0; pp < (panels + 1) / 2; ++pp) {
    const int64_t pi = 2 * pp;
    const uint8_t* ps[2] = {a.w + pi * panel_bytes, a.w + std::min(pi + 1, panels - 1) * panel_bytes};
    const int np = pi + 1 < panels ? 2 : 1;
    for (int64_t r0 = 0; r0 < a.m; r0 += kTile) {
      __m512 out[2 * kTile];
      const int64_t rows = std::min<int64_t>(kTile, a.m - r0);
      if (np == 2)
        row_tiles<T, 2>(ps, lay, a.n_in, x + r0, rows, out);
      else
        row_tiles<T, 1>(ps, lay, a.n_in, x + r0, rows, out);
      for (int q = 0; q < np; ++q)
        for (int64_t r = 0; r < rows; ++r) {
          float* y = a.y + (r0 + r) * a.ldy + (pi + q) * kPanel;
          const __m512 v = out[q * rows + r];
          _mm512_storeu_ps(y, a.accumulate ? _mm512_add_ps(_mm512_loadu_ps(y), v) : v);
        }
    }
  }
}

}  // namespace

template <class T>
void q32_pack(uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_in) {
#pragma omp parallel
  {
    std::vector<IntVec> steps;
    std::vector<uint16_t> d, mins;
#pragma omp for schedule(static)
    for (int64_t pi = 0; pi < rows / kPanel; ++pi) pack_panel<T>(w + pi * kPanel * row_bytes, row_bytes, n_in, steps, d, mins);
  }
}

template <class T>
void q32_packed(const QuantMatmulArgs& a) {
  product<T>(a);
}

#define KVSERVE_INSTANTIATE(T)                                                        \
  template void q32_pack<int8_types::T>(uint8_t*, int64_t, int64_t, int64_t);        \
  template void q32_packed<int8_types::T>(const QuantMatmulArgs&);
KVSERVE_INT8_TYPES32_PACKED(KVSERVE_INSTANTIATE)
#undef KVSERVE_INSTANTIATE

}  // namespace kvserve::KVSERVE_KERNEL_NS

KVSERVE_VNNI_TARGET_END
#endif  // levels without AVX-512: panels are never packed
KVSERVE_KERNEL_TARGET_END
