#include "kernels/small_batch_matmul.h"

#include "kernels/intrinsics.h"

#include <algorithm>

KVSERVE_KERNEL_TARGET_BEGIN
namespace kvserve::KVSERVE_KERNEL_NS {
namespace {
constexpr int kPanel = 64;  // outputs per panel: four AVX-512 registers
constexpr int kRowsPerPass = 6;  // 24 accumulators, leaving registers for the weights
// Panel rows per chunk: every pass over the rows of the batch takes the chunk (16 KiB) from L1,
// and the next chunk streams in meanwhile, so memory never waits for the later passes.
constexpr int64_t kChunk = 64;
constexpr int64_t kPrefetchAhead = 2 * kChunk;  // panel rows

// R rows against rows [k0, k1) of one panel, continuing the partial sums in part (or starting
// from zero when first): the sums stay in registers across the chunk (R·4 <= 24 of them).
// x: [R, ldx]; wp: [k, 64]; part: [R, 64].
#if KVSERVE_HAS_AVX512
template <int R>
void panel_rows(const float* x, int64_t ldx, const float* wp, int64_t k0, int64_t k1, float* part, bool first,
                int pass, int passes) {
  __m512 acc[R][4];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = first ? _mm512_setzero_ps() : _mm512_load_ps(part + r * kPanel + 16 * j);
  // Every pass over a chunk asks for its share of the chunk after next (past a panel's end, the
  // next panel's start): without it the thread's memory stream stops while the FMAs run, and
  // the two costs add instead of overlapping. The requests are spread evenly over all passes
  // (pass p takes panel rows k0 + p, k0 + p + passes, ...), because a burst of them fills the
  // miss buffers and stalls the FMAs; they go to L2, as L1 has too few miss buffers to keep
  // enough lines in flight.
  int64_t next_prefetch = k0 + pass;
  for (int64_t kk = k0; kk < k1; ++kk) {
    const float* wr = wp + kk * kPanel;
    if (kk == next_prefetch) {
      for (int j = 0; j < 4; ++j)
        _mm_prefetch(reinterpret_cast<const char*>(wr + kPrefetchAhead * kPanel + 16 * j), _MM_HINT_T1);
      next_prefetch += passes;
    }
    const __m512 w0 = _mm512_loadu_ps(wr), w1 = _mm512_loadu_ps(wr + 16), w2 = _mm512_loadu_ps(wr + 32),
                 w3 = _mm512_loadu_ps(wr + 48);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 xb = _mm512_set1_ps(x[r * ldx + kk]);
      acc[r][0] = _mm512_fmadd_ps(xb, w0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(xb, w1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(xb, w2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(xb, w3, acc[r][3]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 4; ++j) _mm512_store_ps(part + r * kPanel + 16 * j, acc[r][j]);
}
#else
template <int R>
void panel_rows(const float* x, int64_t ldx, const float* wp, int64_t k0, int64_t k1, float* part, bool first,
                int /*pass*/, int /*passes*/) {
  for (int r = 0; r < R; ++r) {
    float* acc = part + r * kPanel;
    if (first) std::fill(acc, acc + kPanel, 0.0f);
    for (int64_t kk = k0; kk < k1; ++kk) {
      const float xv = x[r * ldx + kk];
      const float* wr = wp + kk * kPanel;
#pragma omp simd
      for (int c = 0; c < kPanel; ++c) acc[c] += xv * wr[c];
    }
  }
}
#endif

using PanelFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, bool, int, int);
constexpr PanelFn kPanelFns[kRowsPerPass + 1] = {nullptr,        panel_rows<1>, panel_rows<2>, panel_rows<3>,
                                                 panel_rows<4>, panel_rows<5>, panel_rows<6>};
}  // namespace

void small_batch_matmul(const float* x, int64_t m, const float* w, int64_t n, int64_t k, int64_t k_padded, float* y,
                        bool accumulate) {
  const int64_t panels = (n + kPanel - 1) / kPanel;
  // Static split: each thread streams one contiguous run of panels.
#pragma omp parallel for schedule(static)
  for (int64_t p = 0; p < panels; ++p) {
    alignas(64) float part[kSmallBatchRows * kPanel];  // [rows, 64] partial sums of this panel
    const float* wp = w + p * k_padded * kPanel;
    const int cols = static_cast<int>(std::min<int64_t>(kPanel, n - p * kPanel));
    for (int64_t b0 = 0; b0 < m; b0 += kSmallBatchRows) {
      const int64_t rows = std::min(kSmallBatchRows, m - b0);
      const int passes = static_cast<int>((rows + kRowsPerPass - 1) / kRowsPerPass);
      for (int64_t k0 = 0; k0 < k; k0 += kChunk)
        for (int pass = 0; pass < passes; ++pass) {
          const int64_t r0 = int64_t{pass} * kRowsPerPass;
          kPanelFns[std::min<int64_t>(kRowsPerPass, rows - r0)](x + (b0 + r0) * k, k, wp, k0, std::min(k, k0 + kChunk),
                                                                part + r0 * kPanel, k0 == 0, pass, passes);
        }
      for (int64_t r = 0; r < rows; ++r) {
        float* out = y + (b0 + r) * n + p * kPanel;
        const float* src = part + r * kPanel;
        if (accumulate)
          for (int c = 0; c < cols; ++c) out[c] += src[c];
        else
          std::copy(src, src + cols, out);
      }
    }
  }
}

}  // namespace kvserve::KVSERVE_KERNEL_NS
KVSERVE_KERNEL_TARGET_END
