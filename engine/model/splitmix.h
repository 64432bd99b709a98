// splitmix64: a tiny deterministic generator, so that a synthetic model's seed gives the same
// file on any machine and standard library.
#pragma once

#include <cstdint>

namespace kvserve {

struct SplitMix64 {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1), on a 2^24 grid.
  float uniform() { return static_cast<float>(next() >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f; }
  // Uniform in (0, 1), never 0 (a logarithm's argument).
  double unit() { return (static_cast<double>(next() >> 11) + 0.5) / 9007199254740992.0; }
};

}  // namespace kvserve
