#include "tools/machine_limits.h"

// GCC 12 warns inside its own AVX-512 header (_mm512_undefined_ps is self-initialised).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cpu_features.h"
#include "common/huge_buffer.h"

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

// Sum of n 32-byte chunks at p (n a multiple of 4), four independent accumulators. kPrefetch:
// each line requested into L2 kAhead bytes before it is read (requests past the end are
// harmless), as the decode kernels do; else plain loads, what the hardware prefetchers alone
// make of a stream.
constexpr size_t kAhead = 4096;
#pragma GCC push_options
#pragma GCC target("avx2")
template <bool kPrefetch>
uint64_t sum_chunks(const uint8_t* p, size_t n) {
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  for (size_t i = 0; i + 4 <= n; i += 4) {
    if constexpr (kPrefetch) {
      _mm_prefetch(reinterpret_cast<const char*>(p + 32 * i + kAhead), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(p + 32 * i + kAhead + 64), _MM_HINT_T1);
    }
    for (int j = 0; j < 4; ++j)
      acc[j] = _mm256_add_epi64(acc[j], _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32 * (i + j))));
  }
  alignas(32) uint64_t t[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), _mm256_add_epi64(_mm256_add_epi64(acc[0], acc[1]), _mm256_add_epi64(acc[2], acc[3])));
  return t[0] + t[1] + t[2] + t[3];
}
#pragma GCC pop_options

// One pass of `threads` std::threads, each summing its share of `bytes` at p (into sums[t]);
// returns its seconds.
template <bool kPrefetch>
double read_pass(const uint8_t* p, size_t bytes, std::vector<uint64_t>& sums) {
  const size_t chunks = bytes / 32, nt = sums.size();
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (size_t t = 0; t < nt; ++t)
    workers.emplace_back([&, t] {
      const size_t lo = chunks * t / nt / 4 * 4, hi = chunks * (t + 1) / nt / 4 * 4;
      sums[t] += sum_chunks<kPrefetch>(p + 32 * lo, hi - lo);
    });
  for (auto& w : workers) w.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A buffer mapped as the weights are (common/huge_buffer.h), every page written.
std::unique_ptr<HugeBuffer> filled_buffer(size_t bytes) {
  auto buffer = std::make_unique<HugeBuffer>(bytes, false);
  auto* p = static_cast<uint8_t*>(buffer->data());
  for (size_t i = 0; i < bytes; i += 4096) std::memset(p + i, static_cast<int>(i >> 12), 4096);
  return buffer;
}

}  // namespace

double measure_plain_read_bandwidth(size_t bytes, int passes) {
  bytes = (std::max<size_t>(bytes, 4096) + 4095) / 4096 * 4096;
  const std::unique_ptr<HugeBuffer> buffer = filled_buffer(bytes);
  std::vector<uint64_t> sums(static_cast<size_t>(std::max(omp_get_max_threads(), 1)));
  double best = 1e30;
  for (int r = 0; r < std::max(passes, 1); ++r)
    best = std::min(best, read_pass<false>(static_cast<const uint8_t*>(buffer->data()), bytes, sums));
  volatile uint64_t keep = sums[0];
  (void)keep;
  return static_cast<double>(bytes) / best;
}

ReadBandwidth measure_read_bandwidth(size_t bytes) { return ReadBandwidthProbe(omp_get_max_threads(), bytes).sample(); }

ReadBandwidthProbe::ReadBandwidthProbe(int threads, size_t bytes)
    : threads_(std::max(threads, 1)),
      bytes_((std::max<size_t>(bytes, 1) + 4095) / 4096 * 4096),
      buffer_(filled_buffer(bytes_)) {}

ReadBandwidthProbe::~ReadBandwidthProbe() = default;

ReadBandwidth ReadBandwidthProbe::sample() {
  const auto* p = static_cast<const uint8_t*>(buffer_->data());
  const int reps = static_cast<int>(std::max<size_t>(2, ((size_t{3} << 30) + bytes_ - 1) / bytes_));
  double best = 1e30, total = 0;
  std::vector<uint64_t> sums(static_cast<size_t>(threads_));
  for (int r = 0; r < reps; ++r) {
    const double t = read_pass<true>(p, bytes_, sums);
    best = std::min(best, t);
    total += t;
  }
  volatile uint64_t keep = sums[0];
  (void)keep;
  const auto bytes = static_cast<double>(bytes_);
  return {bytes * reps / total, bytes / best};
}

CpuTimes read_cpu_times() {
  std::ifstream f("/proc/stat");
  std::string line, name;
  CpuTimes t;
  if (!std::getline(f, line)) return t;
  std::istringstream in(line);
  in >> name;  // "cpu": the sum over CPUs
  unsigned long long v = 0;
  for (int field = 0; field < 8 && in >> v; ++field) {  // user nice system idle iowait irq softirq steal
    t.total += v;
    if (field == 7) t.steal = v;
  }
  return t;
}

double steal_share(const CpuTimes& before, const CpuTimes& after) {
  const unsigned long long total = after.total - before.total;
  return total > 0 ? static_cast<double>(after.steal - before.steal) / static_cast<double>(total) : 0.0;
}

namespace {

// The FMA peak at the widest vectors this CPU has, whatever the build's -march: one loop per
// width, each compiled for its instructions, chosen at run time. 12 independent accumulators
// hide the FMA latency on current cores.
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f")
float fma_run_avx512(long iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(0.001f * i);
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  alignas(64) float t[16];
  float s = 0;
  for (int i = 0; i < 12; ++i) {
    _mm512_store_ps(t, acc[i]);
    for (float x : t) s += x;
  }
  return s;
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
float fma_run_avx2(long iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(0.001f * i);
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  alignas(32) float t[8];
  float s = 0;
  for (int i = 0; i < 12; ++i) {
    _mm256_store_ps(t, acc[i]);
    for (float x : t) s += x;
  }
  return s;
}
#pragma GCC pop_options

float fma_run_scalar(long iters) {
  float acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = 0.001f * i;
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
  float s = 0;
  for (float x : acc) s += x;
  return s;
}

// Iterations of a peak loop, and the best time of 5 runs of it on every thread at once.
constexpr long kPeakIters = 20'000'000;
template <typename T>
double best_parallel_seconds(T (*run)(long)) {
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    double sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel reduction(+ : sink)
    sink += static_cast<double>(run(kPeakIters));
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    volatile double keep = sink;
    (void)keep;
  }
  return best;
}

}  // namespace

double measure_fma_peak() {
  const KernelLevel level = best_supported_level();
  const int lanes = level == KernelLevel::kAvx512 ? 16 : level >= KernelLevel::kAvx2 ? 8 : 1;
  auto run = level == KernelLevel::kAvx512 ? fma_run_avx512 : level >= KernelLevel::kAvx2 ? fma_run_avx2 : fma_run_scalar;
  return 2.0 * 12 * lanes * static_cast<double>(kPeakIters) * omp_get_max_threads() / best_parallel_seconds(run);
}

namespace {

// One loop per instruction set, as for the FMA peak; each returns the int8 multiply-adds it did
// per thread through its result's checksum (kept so the loop is not elided).
#pragma GCC push_options
#pragma GCC target("avx2,avx512f,avx512bw,avx512vnni")
int32_t int8_run_avx512_vnni(long iters) {
  __m512i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_epi32(i);
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  __m512i s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, acc[i]);
  alignas(64) int32_t t[16];
  _mm512_store_si512(t, s);
  int32_t sum = 0;
  for (int32_t x : t) sum += x;
  return sum;
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2")
// The sum of every lane of 12 accumulators (the 256-bit loops' checksum).
int32_t sum_lanes(const __m256i* acc) {
  alignas(32) int32_t t[8];
  int32_t s = 0;
  for (int i = 0; i < 12; ++i) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), acc[i]);
    for (int32_t x : t) s += x;
  }
  return s;
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,avxvnni")
int32_t int8_run_avx_vnni(long iters) {
  __m256i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_epi32(i);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], a, b);
  return sum_lanes(acc);
}
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2")
int32_t int8_run_avx2(long iters) {
  __m256i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_epi32(i);
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2), ones = _mm256_set1_epi16(1);
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i)
      acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));
  return sum_lanes(acc);
}
#pragma GCC pop_options

}  // namespace

double measure_int8_peak() {
  int32_t (*run)(long) = nullptr;
  int macs = 0;  // int8 multiply-adds per accumulator update
  if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) {
    run = int8_run_avx512_vnni;
    macs = 64;
  } else if (__builtin_cpu_supports("avxvnni")) {
    run = int8_run_avx_vnni;
    macs = 32;
  } else if (__builtin_cpu_supports("avx2")) {
    run = int8_run_avx2;
    macs = 32;
  } else {
    return 0.0;
  }
  return 2.0 * 12 * macs * static_cast<double>(kPeakIters) * omp_get_max_threads() / best_parallel_seconds(run);
}

}  // namespace kvserve
