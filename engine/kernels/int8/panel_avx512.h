// The integer panel GEMMs' shared pieces (kernels/int8/k_gemm.cc for the K types,
// kernels/int8/q32_gemm.cc for the 32-value types): 16 weight rows per panel, their
// levels transposed so that 32-bit lane i holds 4 levels of row i (vpdpbusd's layout: lane i
// accumulates output i), activation rows broadcasting 4 levels at a time. Included inside a
// kernel level's target region (AVX-512 with VNNI).
#pragma once

#if KVSERVE_HAS_AVX512
#include <algorithm>
#include <cstdint>
#include <cstring>

namespace kvserve::KVSERVE_KERNEL_NS::panel {

constexpr int kPanel = 16;  // weight rows per panel: the lanes of one vector
constexpr int kTile = 4;    // activation rows per pass over a panel
// Bytes ahead of use at which a packed panel's level stream is requested into L2 (its other
// streams at the same distance scaled to their rates): the hardware prefetchers alone keep too
// few lines in flight for a kernel that spends a few instructions on each.
constexpr int64_t kPanelAhead = 4096;
inline void prefetch_l2(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }

// The region [p, p + bytes) requested into L2 over `calls` calls of next(), a few lines each
// (p 64-byte aligned; after the last call every line has been requested once). Callers make the
// calls frequent: a burst of requests fills the core's miss buffers, and the arithmetic behind
// it waits until they drain. A running pointer, not c * bytes / n per call: two 64-bit
// divisions a call took a third of a one-row panel product's time when its bytes were in cache.
class LineRequests {
 public:
  LineRequests(const uint8_t* p, int64_t bytes, int64_t calls)
      : at_(p), end_(p ? p + bytes : p), step_(calls > 0 ? (bytes + 64 * calls - 1) / (64 * calls) * 64 : bytes) {}
  void next() {
    const uint8_t* stop = end_ - at_ < step_ ? end_ : at_ + step_;
    for (; at_ < stop; at_ += 64) prefetch_l2(at_);
  }

 private:
  const uint8_t* at_;
  const uint8_t* end_;
  int64_t step_;  // bytes a call, a multiple of 64
};

// Packed panels go in pairs, the last alone where their number is odd (each type's layout
// keeps a pair's bytes in the order a product over both reads them): the pairs of `panels`
// panels, and the panels in pair pp.
inline int64_t pair_count(int64_t panels) { return (panels + 1) / 2; }
inline int pair_size(int64_t pp, int64_t panels) { return 2 * pp + 1 < panels ? 2 : 1; }

// The pairs of a product of few rows, each thread a contiguous run of them: one stream through
// memory, which out of the cache reads faster than groups handed out one at a time
// (docs/performance.md). work(pp, then, then_bytes): then is what the caller reads next
// (QuantMatmulArgs::then) for the last pair, null for the others.
template <class Work>
inline void pair_runs(int64_t panels, const uint8_t* then, int64_t then_bytes, Work&& work) {
  const int64_t pairs = pair_count(panels);
#pragma omp parallel for schedule(static)
  for (int64_t pp = 0; pp < pairs; ++pp) {
    const bool last = pp + 1 == pairs;
    work(pp, last ? then : nullptr, last ? then_bytes : 0);
  }
}

// r[0..16) rows of 16 dwords to columns, in place: afterwards r[c] lane i = (before) r[i] lane c.
inline void transpose16(__m512i* r) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  // u[4i + c], 128-bit lane L: column 4L + c of rows 4i..4i+3.
  for (int i = 0; i < 4; ++i) {
    u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  for (int c = 0; c < 4; ++c) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x44), v1 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xEE);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x44), v3 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xEE);
    r[c] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    r[4 + c] = _mm512_shuffle_i32x4(v0, v2, 0xDD);
    r[8 + c] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    r[12 + c] = _mm512_shuffle_i32x4(v1, v3, 0xDD);
  }
}

struct alignas(64) IntVec {
  __m512i v;
};
struct alignas(64) FloatVec {
  __m512 v;
};
// 4 bytes at p in every lane.
inline __m512i broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Activation rows' 4 levels at byte `at` (x0) and at + 4 (x1), each in every lane.
template <int R, class Row>
inline void broadcast_steps(const Row* x, int64_t at, __m512i (&x0)[R], __m512i (&x1)[R]) {
  for (int r = 0; r < R; ++r) {
    x0[r] = broadcast4(x[r].q + at);
    x1[r] = broadcast4(x[r].q + at + 4);
  }
}

// One pair of steps (8 levels) of R activation rows (x[r].q, from byte `at`) against P panels,
// into two vpdpbusd chains, so that few rows do not wait on their latency: dot[p][r] takes the
// first step, dot1[p][r] the second; pair(p, w0, w1) gives panel p's two weight vectors.
template <int R, int P, class Row, class Pair>
inline void dot_pair(const Row* x, int64_t at, Pair&& pair, __m512i (&dot)[P][R], __m512i (&dot1)[P][R]) {
  __m512i x0[R], x1[R];
  broadcast_steps<R>(x, at, x0, x1);
  for (int p = 0; p < P; ++p) {
    __m512i w0, w1;
    pair(p, w0, w1);
    for (int r = 0; r < R; ++r) {
      dot[p][r] = _mm512_dpbusd_epi32(dot[p][r], w0, x0[r]);
      dot1[p][r] = _mm512_dpbusd_epi32(dot1[p][r], w1, x1[r]);
    }
  }
}

// The same pair of steps into one chain, both steps' levels as they are: where R x P chains
// already hide the latency and a second set would leave too few registers.
template <int R, int P, class Row, class Pair>
inline void dot_one(const Row* x, int64_t at, Pair&& pair, __m512i (&dot)[P][R]) {
  __m512i x0[R], x1[R];
  broadcast_steps<R>(x, at, x0, x1);
  for (int p = 0; p < P; ++p) {
    __m512i w0, w1;
    pair(p, w0, w1);
    for (int r = 0; r < R; ++r) dot[p][r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(dot[p][r], w0, x0[r]), w1, x1[r]);
  }
}

}  // namespace kvserve::KVSERVE_KERNEL_NS::panel
#endif
