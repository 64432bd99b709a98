// The 32-value block types (Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL) held as packed panels: each 16
// rows' bytes rewritten once at load, in place and to the same size, into the order the integer
// product reads them (lane i of every vector belongs to row i, as in the panel GEMM of
// kernels/int8/q32_gemm.cc), so that a product at any height streams each panel front to
// back and spends a few instructions per 64 bytes: a decode step then runs at the memory's read
// rate, which the row-major kernels (several instructions per block and row) do not reach.
//
// A panel of 16 rows and nb = n_in / 32 blocks has, per block:
//   scales  the 16 rows' F16 scales; then, for Q4_1/Q5_1, their F16 minimums;
//   masks   5-bit types: 8 words of 64 bits, bit 4i + j of word t the fifth bit of level j of
//           row i in step t;
//   levels  8-bit types 8 vectors (vector t: lane i = row i's levels 4t..4t+3, as the type's
//           levels() gives them; IQ4_NL its indices), 4/5-bit types 4 vectors (vector u: step
//           2u in the low nibbles, step 2u + 1 in the high).
// Panels go in pairs (the last alone where their number is odd), and a pair's bytes are in the
// order a product over both reads them: per block one record, both panels' scales, both
// minimums, both masks, then the levels of each pair of steps, the first panel's before the
// second's. A thread's run of pairs is one stream through memory, which out of the cache reads
// faster than a stream per part of each panel (as for the K types: kernels/int8/k_gemm.cc's
// KLayout). A pair's record is a multiple of 64 bytes for every type; a lone panel's vectors may
// straddle lines.
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

// Where a panel of a pair (np panels: 2, or 1 for a lone last one) keeps its parts: block b's
// record starts np * kRecord * b bytes from the pair's first.
template <class T>
struct Layout32 {
  static constexpr int64_t kScales = 32, kMins = T::has_min ? 32 : 0, kMasks = T::bits == 5 ? 64 : 0;
  static constexpr int64_t kLevels = T::bits == 8 ? 512 : 256;
  static constexpr int64_t kChunk = kLevels / 4;  // one panel's levels of a pair of steps
  static constexpr int64_t kRecord = kScales + kMins + kMasks + kLevels;  // one panel's bytes a block
  // Offsets inside one record (np panels' block), of panel q of the np.
  static constexpr int64_t scales_in(int64_t /*np*/, int64_t q) { return kScales * q; }
  static constexpr int64_t mins_in(int64_t np, int64_t q) { return np * kScales + kMins * q; }
  static constexpr int64_t masks_in(int64_t np, int64_t q) { return np * (kScales + kMins) + kMasks * q; }
  // Steps 2u, 2u + 1.
  static constexpr int64_t levels_in(int64_t np, int64_t q, int u) { return np * (kScales + kMins + kMasks + kChunk * u) + kChunk * q; }
};

// Levels of two blocks in value order, as stored: the type's levels, a lookup type's indices.
template <class T>
__m512i stored_levels(const typename T::Block* b) {
  if constexpr (T::lookup)
    return levels::q4_0_pair(reinterpret_cast<const quant::BlockQ4_0*>(b));
  else
    return vec::levels(b);
}

// One panel's parts, read from the file's layout before any of its bytes are overwritten.
struct ReadPanel32 {
  std::vector<IntVec> steps;  // per block 8 vectors: step t, lane i = row i's 4 levels
  std::vector<uint16_t> d, mins;  // per block the 16 rows'
};

// w: a panel in the file's layout (rows row_bytes apart), into r.
template <class T>
void read_panel32(const uint8_t* w, int64_t row_bytes, int64_t n_in, ReadPanel32& r) {
  using Block = typename T::Block;
  const int64_t nb = n_in / 32;
  r.steps.resize(static_cast<size_t>(n_in / 4));
  r.d.resize(static_cast<size_t>(16 * nb));
  r.mins.resize(static_cast<size_t>(16 * nb));
  for (int64_t c = 0; c < nb / 2; ++c) {
    __m512i v[kPanel];
    for (int i = 0; i < kPanel; ++i) v[i] = stored_levels<T>(reinterpret_cast<const Block*>(w + i * row_bytes) + 2 * c);
    transpose16(v);
    for (int i = 0; i < kPanel; ++i) r.steps[16 * c + i].v = v[i];
  }
  for (int i = 0; i < kPanel; ++i)
    for (int64_t b = 0; b < nb; ++b) {
      const Block& blk = reinterpret_cast<const Block*>(w + i * row_bytes)[b];
      r.d[16 * b + i] = blk.d;
      if constexpr (T::has_min) r.mins[16 * b + i] = blk.m;
    }
}

// r as panel q of the np of the pair at w.
template <class T>
void write_panel32(uint8_t* w, int np, int q, int64_t n_in, const ReadPanel32& r) {
  using L = Layout32<T>;
  const __m512i nib = _mm512_set1_epi8(0x0F);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    const __m512i* s = &r.steps[8 * b].v;
    uint8_t* rec = w + np * L::kRecord * b;
    std::memcpy(rec + L::scales_in(np, q), &r.d[16 * b], 32);
    if constexpr (T::has_min) std::memcpy(rec + L::mins_in(np, q), &r.mins[16 * b], 32);
    if constexpr (T::bits == 5)
      for (int t = 0; t < 8; ++t) {
        const uint64_t bits = _mm512_test_epi8_mask(s[t], _mm512_set1_epi8(0x10));
        std::memcpy(rec + L::masks_in(np, q) + 8 * t, &bits, 8);
      }
    for (int u = 0; u < 4; ++u) {
      uint8_t* at = rec + L::levels_in(np, q, u);
      if constexpr (T::bits == 8) {
        _mm512_storeu_si512(at, s[2 * u]);
        _mm512_storeu_si512(at + 64, s[2 * u + 1]);
      } else {
        _mm512_storeu_si512(at, _mm512_or_si512(_mm512_and_si512(s[2 * u], nib), _mm512_slli_epi16(_mm512_and_si512(s[2 * u + 1], nib), 4)));
      }
    }
  }
}

// Bytes from one block's record of a pair (P panels) to the next.
template <class T, int P>
constexpr int64_t kBlockStride = P * Layout32<T>::kRecord;

// Steps 2u and 2u + 1 of block b of a panel of a pair of P (levels ready for vpdpbusd): lv, mk
// its levels and masks in block 0. Every line read asks for the line kPanelAhead further on in
// the same stream: the hardware prefetchers alone keep too few in flight.
template <class T, int P>
inline void step_pair(const uint8_t* lv, const uint8_t* mk, int64_t b, int u, __m512i& w0, __m512i& w1) {
  constexpr int64_t kStep = P * Layout32<T>::kChunk;  // from one pair of steps to the next
  const uint8_t* at = lv + kBlockStride<T, P> * b + kStep * u;
  if constexpr (T::bits == 8) {
    prefetch_l2(at + kPanelAhead);
    prefetch_l2(at + kPanelAhead + 64);
    w0 = levels::load64(at);
    w1 = levels::load64(at + 64);
  } else {
    const __m512i nib = _mm512_set1_epi8(0x0F);
    prefetch_l2(at + kPanelAhead);
    const __m512i v = levels::load64(at);
    w0 = _mm512_and_si512(v, nib);
    w1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);
    if constexpr (T::bits == 5) {
      const __m512i fifth = _mm512_set1_epi8(0x10);
      const uint8_t* masks = mk + kBlockStride<T, P> * b;
      if (u == 0) prefetch_l2(masks + kPanelAhead);
      uint64_t m0, m1;
      std::memcpy(&m0, masks + 8 * (2 * u), 8);
      std::memcpy(&m1, masks + 8 * (2 * u + 1), 8);
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

// R activation rows times the P panels of the pair at w (P = 2, or 1 for a lone last panel):
// out[p * R + r] lane i = output of row i of panel p. next: bytes to request into L2
// meanwhile, a slice a pair of steps (what the caller reads after this product).
template <class T, int R, int P>
void tile(const uint8_t* w, int64_t n_in, const Row32* x, __m512* out, const uint8_t* next = nullptr,
          int64_t next_bytes = 0) {
  using L = Layout32<T>;
  constexpr int64_t kStride = kBlockStride<T, P>;
  const uint8_t *lv[P], *mk[P];
  for (int p = 0; p < P; ++p) {
    lv[p] = w + L::levels_in(P, p, 0);
    mk[p] = w + L::masks_in(P, p);
  }
  __m512 acc[P][R];
  for (int p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r) acc[p][r] = _mm512_setzero_ps();
  LineRequests requests(next, next_bytes, n_in / 8);
  for (int64_t b = 0; b < n_in / 32; ++b) {
    __m512i dot[P][R], dot1[P][R];  // two chains (dot_pair)
    for (int p = 0; p < P; ++p)
      for (int r = 0; r < R; ++r) dot[p][r] = dot1[p][r] = _mm512_setzero_si512();
    // Unrolled: each pair of steps its own registers (a rolled loop moved them between chains).
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      if (next) requests.next();
      dot_pair<R, P>(
          x, 32 * b + 8 * u, [&](int p, __m512i& w0, __m512i& w1) { step_pair<T, P>(lv[p], mk[p], b, u, w0, w1); },
          dot, dot1);
    }
    // The scales (and minimums) of both panels: one line.
    const uint8_t* rec = w + kStride * b;
    prefetch_l2(rec + kPanelAhead);
    for (int p = 0; p < P; ++p) {
      const __m512 d = _mm512_cvtph_ps(levels::load32(rec + L::scales_in(P, p)));
      for (int r = 0; r < R; ++r) {
        const __m512i sum = _mm512_sub_epi32(_mm512_add_epi32(dot[p][r], dot1[p][r]), _mm512_set1_epi32(T::offset * x[r].sum[b]));
        acc[p][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(x[r].d[b])), acc[p][r]);
      }
      if constexpr (T::has_min) {
        const __m512 mn = _mm512_cvtph_ps(levels::load32(rec + L::mins_in(P, p)));
        for (int r = 0; r < R; ++r)
          acc[p][r] = _mm512_fmadd_ps(mn, _mm512_set1_ps(x[r].d[b] * static_cast<float>(x[r].sum[b])), acc[p][r]);
      }
    }
  }
  for (int p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r) out[p * R + r] = acc[p][r];
}

// tile() at a height of `rows` (1..kTile) activation rows. Without next (every pair but a
// product's last), tile is called with its requests compiled away.
template <class T, int P>
void row_tiles(const uint8_t* w, int64_t n_in, const Row32* x, int64_t rows, __m512* out, const uint8_t* next,
               int64_t next_bytes) {
  if (next) {
    switch (rows) {
      case 1: return tile<T, 1, P>(w, n_in, x, out, next, next_bytes);
      case 2: return tile<T, 2, P>(w, n_in, x, out, next, next_bytes);
      case 3: return tile<T, 3, P>(w, n_in, x, out, next, next_bytes);
      default: return tile<T, 4, P>(w, n_in, x, out, next, next_bytes);
    }
  }
  switch (rows) {
    case 1: return tile<T, 1, P>(w, n_in, x, out);
    case 2: return tile<T, 2, P>(w, n_in, x, out);
    case 3: return tile<T, 3, P>(w, n_in, x, out);
    default: return tile<T, 4, P>(w, n_in, x, out);
  }
}

template <class T>
void product(const QuantMatmulArgs& a) {
  Row32 x[kSmallBatchRows];
  const int64_t stride = int8::row32_bytes(a.n_in);
#pragma omp parallel for schedule(static) if (a.m > 4)
  for (int64_t r = 0; r < a.m; ++r)
    x[r] = int8::round_row32(a.x + r * a.n_in, a.n_in, static_cast<uint8_t*>(a.scratch) + r * stride);
  // Each thread a contiguous run of pairs (pair_runs), each activation broadcast loaded once for
  // both panels of a pair; rows 4 at a time over a pair while it is in cache.
  const int64_t panel_bytes = kPanel * a.row_bytes, panels = a.n_out / kPanel;
  pair_runs(panels, a.then, a.then_bytes, [&](int64_t pp, const uint8_t* then, int64_t then_bytes) {
    const int64_t pi = 2 * pp;
    const uint8_t* w = a.w + pi * panel_bytes;
    const int np = pair_size(pp, panels);
    for (int64_t r0 = 0; r0 < a.m; r0 += kTile) {
      __m512 out[2 * kTile];
      const int64_t rows = std::min<int64_t>(kTile, a.m - r0);
      const uint8_t* next = r0 == 0 ? then : nullptr;
      const int64_t next_bytes = next ? then_bytes : 0;
      if (np == 2)
        row_tiles<T, 2>(w, a.n_in, x + r0, rows, out, next, next_bytes);
      else
        row_tiles<T, 1>(w, a.n_in, x + r0, rows, out, next, next_bytes);
      for (int q = 0; q < np; ++q)
        for (int64_t r = 0; r < rows; ++r) {
          float* y = a.y + (r0 + r) * a.ldy + (pi + q) * kPanel;
          const __m512 v = out[q * rows + r];
          _mm512_storeu_ps(y, a.accumulate ? _mm512_add_ps(_mm512_loadu_ps(y), v) : v);
        }
    }
  });
}

}  // namespace

template <class T>
void q32_pack(uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_in) {
  const int64_t panels = rows / kPanel, panel_bytes = kPanel * row_bytes;
#pragma omp parallel
  {
    ReadPanel32 held[2];
#pragma omp for schedule(static)
    for (int64_t pp = 0; pp < pair_count(panels); ++pp) {
      uint8_t* pair = w + 2 * pp * panel_bytes;
      const int np = pair_size(pp, panels);
      // Both panels read before either is written: their records share the pair's bytes.
      for (int q = 0; q < np; ++q) read_panel32<T>(pair + q * panel_bytes, row_bytes, n_in, held[q]);
      for (int q = 0; q < np; ++q) write_panel32<T>(pair, np, q, n_in, held[q]);
    }
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
