// F16 weights held as packed panels (model.repack_weights): each 16 rows rewritten once at load,
// in place and to the same bytes, so that column k of a panel is the 16 rows' halves side by
// side (lane i = row i). A product widens one column with one vcvtph2ps and multiplies it by
// one activation value broadcast: nothing is summed across lanes, 16 outputs leave in one store
// and each panel is one stream front to back, requested kPanelAhead bytes ahead into L2. Float
// products and sums, as the row layout's kernels (kernels/quant_matmul.cc).
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

// R activation rows (x: [R, ldx]) times P panels (w: P panels panel_bytes apart, n_in columns
// each): out[p * R + r] lane i = output of row i of panel p. Even and odd columns in two
// chains, so that few rows do not wait on the FMA latency. ahead: request each panel's lines
// ahead; next: bytes to request into L2 meanwhile, a slice every 4 columns.
template <int R, int P>
void tile(const uint8_t* w, int64_t panel_bytes, const float* x, int64_t ldx, int64_t n_in, __m512* out,
          bool ahead = true, const uint8_t* next = nullptr, int64_t next_bytes = 0) {
  __m512 acc[2][P][R];
  for (int c = 0; c < 2; ++c)
    for (int p = 0; p < P; ++p)
      for (int r = 0; r < R; ++r) acc[c][p][r] = _mm512_setzero_ps();
  LineRequests requests(next, next_bytes, (n_in + 3) / 4);
  int64_t k = 0;
  for (; k + 2 <= n_in; k += 2) {
    if (next && k % 4 == 0) requests.next();
    for (int p = 0; p < P; ++p) {
      const uint8_t* at = w + p * panel_bytes + 32 * k;
      if (ahead) prefetch_l2(at + kPanelAhead);
      const __m512 w0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at)));
      const __m512 w1 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(at + 32)));
      for (int r = 0; r < R; ++r) {
        acc[0][p][r] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[r * ldx + k]), acc[0][p][r]);
        acc[1][p][r] = _mm512_fmadd_ps(w1, _mm512_set1_ps(x[r * ldx + k + 1]), acc[1][p][r]);
      }
    }
  }
  if (k < n_in)
    for (int p = 0; p < P; ++p) {
      const __m512 w0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + p * panel_bytes + 32 * k)));
      for (int r = 0; r < R; ++r) acc[0][p][r] = _mm512_fmadd_ps(w0, _mm512_set1_ps(x[r * ldx + k]), acc[0][p][r]);
    }
  for (int p = 0; p < P; ++p)
    for (int r = 0; r < R; ++r) out[p * R + r] = _mm512_add_ps(acc[0][p][r], acc[1][p][r]);
}

void store(const QuantMatmulArgs& a, int64_t r0, int rows, int64_t panel, const __m512* out) {
  for (int r = 0; r < rows; ++r) {
    float* y = a.y + (r0 + r) * a.ldy + panel * kPanel;
    _mm512_storeu_ps(y, a.accumulate ? _mm512_add_ps(_mm512_loadu_ps(y), out[r]) : out[r]);
  }
}

// One or two activation rows over P panels at a time (4 or 2: one stream each), each group's
// bytes requested while the one before it runs (claim_groups, as the packed integer panels).
template <int R, int P>
void few_rows(const QuantMatmulArgs& a) {
  const int64_t panels = a.n_out / kPanel, panel_bytes = kPanel * a.row_bytes;
  panel::claim_groups(a.w, panels * panel_bytes, P * panel_bytes,
                      [&](int64_t g, const uint8_t* next_w, int64_t next_bytes, bool ahead) {
    const int64_t p0 = g * P;
    __m512 out[P * R];
    if (p0 + P <= panels) {
      tile<R, P>(a.w + p0 * panel_bytes, panel_bytes, a.x, a.n_in, a.n_in, out, ahead, next_w, next_bytes);
    } else {
      for (int64_t p = p0; p < panels; ++p) tile<R, 1>(a.w + p * panel_bytes, panel_bytes, a.x, a.n_in, a.n_in, out + (p - p0) * R);
    }
    for (int64_t p = p0; p < std::min(panels, p0 + P); ++p) store(a, 0, R, p, out + (p - p0) * R);
  }, a.then, a.then_bytes);
}

}  // namespace


void f16_panels_matmul(const QuantMatmulArgs& a) {
  if (a.m == 1) return few_rows<1, 4>(a);
  if (a.m == 2) return few_rows<2, 2>(a);
  // More rows: tiles of up to 8 rows over each panel in turn, the panel read from cache after
  // the first.
  const int64_t panels = a.n_out / kPanel, panel_bytes = kPanel * a.row_bytes;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t p = 0; p < panels; ++p) {
    const uint8_t* w = a.w + p * panel_bytes;
    for (int64_t r0 = 0; r0 < a.m; r0 += 8) {
      __m512 out[8];
      const int rows = static_cast<int>(std::min<int64_t>(8, a.m - r0));
      const float* x = a.x + r0 * a.n_in;
      switch (rows) {
        case 1: tile<1, 1>(w, panel_bytes, x, a.n_in, a.n_in, out); break;
        case 2: tile<2, 1>(w, panel_bytes, x, a.n_in, a.n_in, out); break;
        case 3: tile<3, 1>(w, panel_bytes, x, a.n_in, a.n_in, out); break;
        case 4: tile<4, 1>(w, panel_bytes, x, a.n_in, a.n_in, out); break;
        case 5: tile<5, 1>(w, panel_bytes, x, a.n_in, a.n_in, out); break;
        case 6: tile<6, 1>(w, panel_bytes, x, a.n_in, a.n_in, out); break;
        case 7: tile<7, 1>(w, panel_bytes, x, a.n_in, a.n_in, out); break;
        default: tile<8, 1>(w, panel_bytes, x, a.n_in, a.n_in, out); break;
      }
      store(a, r0, rows, p, out);
    }
  }
}

void pack_f16_panels(uint8_t* w, int64_t rows, int64_t n_in) {
  const int64_t row_bytes = 2 * n_in;
#pragma omp parallel
  {
    std::vector<uint16_t> rows16(static_cast<size_t>(kPanel * n_in));
#pragma omp for schedule(static)
    for (int64_t p = 0; p < rows / kPanel; ++p) {
      uint8_t* at = w + p * kPanel * row_bytes;
      std::memcpy(rows16.data(), at, static_cast<size_t>(kPanel * row_bytes));
      auto* out = reinterpret_cast<uint16_t*>(at);
      for (int64_t k = 0; k < n_in; ++k)
        for (int i = 0; i < kPanel; ++i) out[k * kPanel + i] = rows16[static_cast<size_t>(i * n_in + k)];
    }
  }
}

void dequantize_f16_panels(const uint8_t* w, int64_t rows, int64_t n_in, float* out) {
  const int64_t cols16 = n_in / 16 * 16;
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < rows / kPanel; ++p) {
    const auto* src = reinterpret_cast<const uint16_t*>(w + p * kPanel * 2 * n_in);  // [n_in, 16]
    float* dst = out + p * kPanel * n_in;                                          // [16, n_in]
    // 16 columns at a time: widened (v[c] lane i = row i of column k + c), then transposed.
    for (int64_t k = 0; k < cols16; k += 16) {
      __m512i v[16];
      for (int c = 0; c < 16; ++c)
        v[c] = _mm512_castps_si512(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + (k + c) * kPanel))));
      panel::transpose16(v);
      for (int i = 0; i < kPanel; ++i) _mm512_storeu_si512(dst + i * n_in + k, v[i]);
    }
    for (int64_t k = cols16; k < n_in; ++k) {
      alignas(64) float col[16];
      _mm512_store_ps(col, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k * kPanel))));
      for (int i = 0; i < kPanel; ++i) dst[i * n_in + k] = col[i];
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
