// The machine's own limits, measured in the same run as a benchmark: memory bandwidth (a STREAM
// triad over arrays far larger than the caches) and fp32 FMA peak (independent FMA chains in
// vector registers on every thread).
#pragma once

namespace kvserve {

// Best of `reps` triads a[i] = b[i] + s·c[i] over 3 arrays of `mib` MiB each; bytes/s moved,
// the read for ownership of a included.
double measure_bandwidth(int mib = 256, int reps = 5);
// Best of `reps` passes of every thread summing its share of one buffer of `mib` MiB, mapped
// as the weights are (weights/huge_buffer.h): bytes/s read. A decode step only reads its
// weights, so this is its limit; here it runs below the triad's count of bytes moved.
double measure_read_bandwidth(int mib = 512, int reps = 5);
// fp32 floating-point operations per second at full FMA throughput on all threads.
double measure_fma_peak();

}  // namespace kvserve
