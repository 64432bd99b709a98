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
// (weights/huge_buffer.h). A decode step only reads its weights, so this is its limit; here it
// runs below the triad's count of bytes moved. On a shared machine the rate of a single pass
// moves by a factor of two from one to the next, in bursts a few tens of milliseconds long,
// so the best pass is a burst, above what any run of a second sustains.
struct ReadBandwidth {
  double sustained = 0;  // bytes/s: all passes' bytes over their total time
  double best = 0;       // bytes/s: the fastest pass
};
ReadBandwidth measure_read_bandwidth(int mib = 512, int reps = 8);
// The same read passes, repeatable between a benchmark's runs: its buffer made once, and its
// threads plain std::threads made per sample, so that no second OpenMP team exists beside the
// engine's (libgomp then throttles the spinning of every team's barriers).
class ReadBandwidthProbe {
 public:
  explicit ReadBandwidthProbe(int threads, int mib = 512);
  ~ReadBandwidthProbe();
  ReadBandwidth sample(int reps = 6);

 private:
  int threads_;
  size_t bytes_;
  std::unique_ptr<HugeBuffer> buffer_;
};
// fp32 floating-point operations per second at full FMA throughput on all threads.
double measure_fma_peak();

}  // namespace kvserve
