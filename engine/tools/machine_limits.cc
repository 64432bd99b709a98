#include "tools/machine_limits.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <memory>

namespace kvserve {

double measure_bandwidth(int mib, int reps) {
  const size_t n = static_cast<size_t>(mib) << 18;  // floats
  std::unique_ptr<float[]> a(new float[n]), b(new float[n]), c(new float[n]);
#pragma omp parallel for
  for (size_t i = 0; i < n; ++i) {
    a[i] = 0.0f;
    b[i] = 1.0f;
    c[i] = 2.0f;
  }
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for
    for (size_t i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  volatile float sink = a[n / 2];
  (void)sink;
  // Four arrays' bytes, not STREAM's customary three: with ordinary stores each line of a is
  // read for ownership before it is written back, so the memory moves b, c and a twice. Counted
  // as three, a read-only stream such as a decode step's weights beat the "limit" (116%).
  return 4.0 * n * sizeof(float) / best;
}

namespace {

#if defined(__AVX512F__)
using Vec = __m512;
constexpr int kLanes = 16;
inline Vec vset(float x) { return _mm512_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline float vsum(Vec v) {  // (not _mm512_reduce_add_ps: GCC 12 warns inside it)
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  float s = 0;
  for (float x : t) s += x;
  return s;
}
#elif defined(__AVX2__) && defined(__FMA__)
using Vec = __m256;
constexpr int kLanes = 8;
inline Vec vset(float x) { return _mm256_set1_ps(x); }
inline Vec vfma(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline float vsum(Vec v) {
  alignas(32) float t[8];
  _mm256_store_ps(t, v);
  float s = 0;
  for (float x : t) s += x;
  return s;
}
#else
using Vec = float;
constexpr int kLanes = 1;
inline Vec vset(float x) { return x; }
inline Vec vfma(Vec a, Vec b, Vec c) { return a * b + c; }
inline float vsum(Vec v) { return v; }
#endif

// 12 independent accumulators hide the FMA latency on current cores.
double fma_run(long iters) {
  Vec acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = vset(0.001f * i);
  const Vec m = vset(0.999999f), a = vset(1e-7f);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = vfma(acc[i], m, a);
  float s = 0;
  for (int i = 0; i < 12; ++i) s += vsum(acc[i]);
  return s;
}

}  // namespace

double measure_fma_peak() {
  const long iters = 20'000'000;
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    double sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : sink)
    sink += fma_run(iters);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    volatile double keep = sink;
    (void)keep;
  }
  return 2.0 * 12 * kLanes * static_cast<double>(iters) * omp_get_max_threads() / best;
}

}  // namespace kvserve
