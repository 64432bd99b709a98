// F16 weights held as packed panels (model.repack_weights): each 16 rows rewritten once at load,
// in place and to the same bytes, so that column k of a panel is the 16 rows' halves side by
// side (lane i = row i). A product widens one column with one vcvtph2ps and multiplies it by
// one activation value broadcast: nothing is summed across lanes and 16 outputs leave in one
// store. Panels go in pairs (the last alone where their number is odd), column k of the first
// beside column k of the second, so that a product over a pair reads one stream front to back
// (one line a column), requested kPanelAhead bytes ahead into L2, and each thread a contiguous
// run of pairs (as the integer panels: kernels/int8/k_gemm.cc's KLayout). Float products and
// sums, as the row layout's kernels (kernels/quant_matmul.cc).
#include "kernels/quant_matmul.h"

#include "kernels/intrinsics.h"

#include <algorithm>
#include <cstring>
#include <vector>

KVSERVE_KERNEL_TARGET_BEGIN

#if KVSERVE_HAS_AVX512
#include "kernels/int8/panel_avx512.h"
#endif

namespace kvserve::KVSERVE_KERNEL_NS {

#if KVSERVE_HAS_AVX512
namespace {

using panel::kPanel;
using panel::kPanelAhead;
using panel::prefetch_l2;
using panel::LineRequests;
using panel::pair_count;
using panel::pair_size;

// R activation rows (x: [R, ldx]) times the P panels of the pair at w (P = 2, or 1 for a lone
// last panel; n_in columns, column k of panel p at 32 * (P * k + p) bytes): out[p * R + r]
// lane i = output of row i of panel p. Even and odd columns in two chains, so that few rows do
// not wait on the FMA latency. next: bytes to request into L2 meanwhile, a slice every 4 columns.
template <int R, int P>
void tile(const uint8_t* w, const float* x, int64_t ldx, int64_t n_in, __m512* out, const uint8_t* next = nullptr,
          int64_t next_bytes = 0) {
  __m512 acc[2][P][R];
  for (int c = 0; c < 2; ++c)
    for (int p = 0; p < P; ++p)
      for (int r = 0; r < R; ++r) acc[c][p][r] = _mm512_setzero_ps();
  LineRequests requests(next, next_bytes, (n_in + 3) / 4);
  auto column = [&](int64_t k, int p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + 32 * (P * k + p))));
  };
  int64_t k = 0;
  for (; k + 2 <= n_in; k += 2) {
    if (next && k % 4 == 0) requests.next();
    // Columns k, k + 1 of the pair: P lines.
    for (int l = 0; l < P; ++l) prefetch_l2(w + 32 * P * k + 64 * l + kPanelAhead);
    for (int p = 0; p < P; ++p) {
      const __m512 w0 = column(k, p), w1 = column(k + 1, p);
      for (int r = 0; r < R; ++r) {
        acc[0][p][r] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[r * ldx + k]), acc[0][p][r]);
        acc[1][p][r] = _mm512_fmadd_ps(w1, _mm512_set1_ps(x[r * ldx + k + 1]), acc[1][p][r]);
      }
    }
  }
  if (k < n_in)
    for (int p = 0; p < P; ++p) {
      const __m512 w0 = column(k, p);
      for (int r = 0; r < R; ++r) acc[0][p][r] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[r * ldx + k]), acc[0][p][r]);
    }
  for (int p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r) out[p * R + r] = _mm512_add_ps(acc[0][p][r], acc[1][p][r]);
}

// tile() at a height of `rows` (1..4) activation rows.
template <int P>
void row_tile(const uint8_t* w, const float* x, int64_t n_in, int rows, __m512* out, const uint8_t* next,
              int64_t next_bytes) {
  switch (rows) {
    case 1: tile<1, P>(w, x, n_in, n_in, out, next, next_bytes); break;
    case 2: tile<2, P>(w, x, n_in, n_in, out, next, next_bytes); break;
    case 3: tile<3, P>(w, x, n_in, n_in, out, next, next_bytes); break;
    default: tile<4, P>(w, x, n_in, n_in, out, next, next_bytes); break;
  }
}

// Rows [r0, r0 + rows) over pair pp (`rows` at most 4); next as tile()'s.
void pair_rows(const QuantMatmulArgs& a, int64_t pp, int64_t r0, int rows, const uint8_t* next, int64_t next_bytes) {
  const int64_t panels = a.n_out / kPanel, panel_bytes = kPanel * a.row_bytes, pi = 2 * pp;
  const uint8_t* w = a.w + pi * panel_bytes;
  const float* x = a.x + r0 * a.n_in;
  __m512 out[2 * 4];
  const int np = pair_size(pp, panels);
  if (np == 2)
    row_tile<2>(w, x, a.n_in, rows, out, next, next_bytes);
  else
    row_tile<1>(w, x, a.n_in, rows, out, next, next_bytes);
  for (int q = 0; q < np; ++q)
    for (int r = 0; r < rows; ++r) {
      float* y = a.y + (r0 + r) * a.ldy + (pi + q) * kPanel;
      const __m512 v = out[q * rows + r];
      _mm512_storeu_ps(y, a.accumulate ? _mm512_add_ps(_mm512_loadu_ps(y), v) : v);
    }
}

}  // namespace

void f16_panels_matmul(const QuantMatmulArgs& a) {
  const int64_t panels = a.n_out / kPanel;
  if (a.m <= 8) {
    panel::pair_runs(panels, a.then, a.then_bytes, [&](int64_t pp, const uint8_t* then, int64_t then_bytes) {
      for (int64_t r0 = 0; r0 < a.m; r0 += 4)
        pair_rows(a, pp, r0, static_cast<int>(std::min<int64_t>(4, a.m - r0)), r0 == 0 ? then : nullptr,
                  r0 == 0 ? then_bytes : 0);
    });
    return;
  }
  // More rows: compute, not the read, bounds them; pairs handed out one at a time, each read
  // from cache after its first row tile.
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t pp = 0; pp < pair_count(panels); ++pp)
    for (int64_t r0 = 0; r0 < a.m; r0 += 4)
      pair_rows(a, pp, r0, static_cast<int>(std::min<int64_t>(4, a.m - r0)), nullptr, 0);
}

void pack_f16_panels(uint8_t* w, int64_t rows, int64_t n_in) {
  const int64_t row_bytes = 2 * n_in, panels = rows / kPanel;
#pragma omp parallel
  {
    std::vector<uint16_t> rows16(static_cast<size_t>(2 * kPanel * n_in));
#pragma omp for schedule(static)
    for (int64_t pp = 0; pp < pair_count(panels); ++pp) {
      uint8_t* at = w + 2 * pp * kPanel * row_bytes;
      const int64_t np = pair_size(pp, panels);
      std::memcpy(rows16.data(), at, static_cast<size_t>(np * kPanel * row_bytes));
      auto* out = reinterpret_cast<uint16_t*>(at);
      for (int64_t k = 0; k < n_in; ++k)
        for (int64_t q = 0; q < np; ++q)
          for (int i = 0; i < kPanel; ++i)
            out[(np * k + q) * kPanel + i] = rows16[static_cast<size_t>((q * kPanel + i) * n_in + k)];
    }
  }
}

void dequantize_f16_panels(const uint8_t* w, int64_t rows, int64_t n_in, float* out) {
  const int64_t cols16 = n_in / 16 * 16, panels = rows / kPanel;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < panels; ++p) {
    const int64_t np = pair_size(p / 2, panels), q = p % 2;
    // Column k of this panel at src + np * kPanel * k: [n_in, 16], np panels interleaved.
    const auto* src = reinterpret_cast<const uint16_t*>(w + p / 2 * 2 * kPanel * 2 * n_in) + q * kPanel;
    float* dst = out + p * kPanel * n_in;  // [16, n_in]
    auto col = [&](int64_t k) {
      return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + np * kPanel * k)));
    };
    // 16 columns at a time: widened (v[c] lane i = row i of column k + c), then transposed.
    for (int64_t k = 0; k < cols16; k += 16) {
      __m512i v[16];
      for (int c = 0; c < 16; ++c) v[c] = _mm512_castps_si512(col(k + c));
      panel::transpose16(v);
      for (int i = 0; i < kPanel; ++i) _mm512_storeu_si512(dst + i * n_in + k, v[i]);
    }
    for (int64_t k = cols16; k < n_in; ++k) {
      alignas(64) float c[16];
      _mm512_store_ps(c, col(k));
      for (int i = 0; i < kPanel; ++i) dst[i * n_in + k] = c[i];
    }
  }
}

#else   // levels without AVX-512: F16 keeps the row layout
void f16_panels_matmul(const QuantMatmulArgs&) {}
void pack_f16_panels(uint8_t*, int64_t, int64_t) {}
void dequantize_f16_panels(const uint8_t*, int64_t, int64_t, float*) {}
#endif

}  // namespace kvserve::KVSERVE_KERNEL_NS

KVSERVE_KERNEL_TARGET_END
