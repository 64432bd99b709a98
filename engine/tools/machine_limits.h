// The machine's own limits, measured in the same run as a benchmark: memory bandwidth (a STREAM
// triad over arrays far larger than the caches) and fp32 FMA peak (independent FMA chains in
// vector registers on every thread).
#pragma once

#include <cstddef>
#include <memory>

namespace kvserve {

class HugeBuffer;

// Best of `reps` triads a[i] = b[i] + s·c[i] over 3 arrays of `mib` MiB each; bytes/s moved,
// the read for ownership of a included.
double measure_bandwidth(int mib = 256, int reps = 5);
// Passes of every thread summing its share of one buffer, mapped as the weights are
// (common/huge_buffer.h), each line requested into L2 4 KiB ahead as the decode kernels request
// theirs (without that, the hardware prefetchers alone kept a plain sum at 60-80% of what the
// kernels stream here). A decode step only reads its weights and K/V, so this is its limit
// when the buffer holds as many bytes as a step streams: both then meet the same caches (a CPU
// whose last-level cache holds a small model serves part of every step from it, which a buffer
// far larger than the caches never sees). On a shared machine the rate of a single pass moves
// by a factor of two from one to the next, in bursts a few tens of milliseconds long, so the
// best pass is a burst, above what any run of a second sustains.
struct ReadBandwidth {
  double sustained = 0;  // bytes/s: all passes' bytes over their total time
  double best = 0;       // bytes/s: the fastest pass
};
ReadBandwidth measure_read_bandwidth(size_t bytes = size_t{512} << 20);
// The same read passes, repeatable between a benchmark's runs: its buffer made once, and its
// threads plain std::threads made per sample, so that no second OpenMP team exists beside the
// engine's (libgomp then throttles the spinning of every team's barriers).
class ReadBandwidthProbe {
 public:
  // bytes: the buffer, rounded up to whole 4 KiB pages (the fill's step; the mapping is in
  // 2 MiB pages).
  explicit ReadBandwidthProbe(int threads, size_t bytes = size_t{512} << 20);
  ~ReadBandwidthProbe();
  // Enough passes to read 3 GiB (at least two): a sample lasts about as long whatever the size.
  ReadBandwidth sample();

 private:
  int threads_;
  size_t bytes_;
  std::unique_ptr<HugeBuffer> buffer_;
};
// The machine's CPU time so far, from /proc/stat (all zero where it cannot be read). On a
// virtual machine, steal is time a vCPU was ready to run while the host ran something else:
// a run with much of it was slowed by a neighbour, not by the code.
struct CpuTimes {
  unsigned long long total = 0;  // every state's ticks
  unsigned long long steal = 0;
};
CpuTimes read_cpu_times();
// Share of the CPU time between two readings that was stolen (0 when none passed).
double steal_share(const CpuTimes& before, const CpuTimes& after);
// fp32 floating-point operations per second at full FMA throughput on all threads.
double measure_fma_peak();
// int8 operations per second (a multiply and an add each) at full dot-product throughput on all
// threads: AVX-512 VNNI, else AVX-VNNI, else AVX2's two-step byte products; 12 independent
// accumulators each, no memory traffic.
double measure_int8_peak();
// The read bandwidth a plain streaming read reaches, with no engine code in it: the best of
// `passes` passes of every thread summing its share of a `bytes` buffer far larger than the
// last-level cache, plain loads only (no software prefetch). The limit a decode step is held
// against: nothing the engine does to its access pattern moves it.
double measure_plain_read_bandwidth(size_t bytes = size_t{1} << 30, int passes = 5);

}  // namespace kvserve
