// The fused integer kernels' walk over a matrix (int8/q32_fused.cc, int8/k_fused.cc,
// int8/k_fused_vec.cc): groups of kFusedGroupRows weight rows shared out among the threads,
// each group times the activation rows kFusedPair at a time (after the first pass the group's
// weights are in L1), and the group kFusedAhead groups on requested into L1 evenly over the
// first pass's steps, so the memory stream runs under the arithmetic without a burst that fills
// the miss buffers. Included inside a kernel level's target region.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/quant_matmul.h"

namespace kvserve::KVSERVE_KERNEL_NS::int8 {

constexpr int kFusedGroupRows = 4;  // weight rows sharing each load of the activations
constexpr int kFusedPair = 2;       // activation rows sharing each unpacked weight
constexpr int64_t kFusedAhead = 2;  // prefetch distance, in groups

// The next-but-one group's bytes, requested per_step bytes a step.
struct Ahead {
  const char* p = nullptr;
  int64_t per_step = 0;
  void at(int64_t step) const {
    if (!p) return;
    for (int64_t off = step * per_step; off < (step + 1) * per_step; off += 64) _mm_prefetch(p + off, _MM_HINT_T0);
  }
};

// Calls group(w, rows, r0, mr, ahead, out) for every group of `rows` weight rows at w and every
// mr (1..kFusedPair) activation rows from r0, which writes out[m * kFusedGroupRows + g]; the
// results go to a.y (added where a.accumulate). `steps`: the steps a group's pass takes.
template <class Group>
inline void fused_rows(const QuantMatmulArgs& a, int64_t steps, const Group& group) {
  const int64_t groups = (a.n_out + kFusedGroupRows - 1) / kFusedGroupRows;
  const int64_t group_bytes = kFusedGroupRows * a.row_bytes;
  const int64_t per_step = ((group_bytes + steps - 1) / steps + 63) / 64 * 64;
#pragma omp parallel for schedule(static)
  for (int64_t grp = 0; grp < groups; ++grp) {
    const int64_t j0 = grp * kFusedGroupRows;
    const int rows = static_cast<int>(std::min<int64_t>(kFusedGroupRows, a.n_out - j0));
    Ahead ahead;
    if (grp + kFusedAhead < groups) ahead = {reinterpret_cast<const char*>(a.w + (grp + kFusedAhead) * group_bytes), per_step};
    for (int64_t r0 = 0; r0 < a.m; r0 += kFusedPair) {
      const int mr = static_cast<int>(std::min<int64_t>(kFusedPair, a.m - r0));
      float out[kFusedPair * kFusedGroupRows];
      group(a.w + j0 * a.row_bytes, rows, r0, mr, r0 == 0 ? ahead : Ahead{}, out);
      for (int m = 0; m < mr; ++m) {
        float* y = a.y + (r0 + m) * a.ldy + j0;
        for (int g = 0; g < rows; ++g)
          y[g] = a.accumulate ? y[g] + out[m * kFusedGroupRows + g] : out[m * kFusedGroupRows + g];
      }
    }
  }
}

// The batch kernels' walk on the levels without AVX-512 (int8/q32_fused.cc, int8/k_fused_vec.cc):
// the same groups shared out among the threads; hold(j0, rows) unpacks a group into the
// thread's buffer once (a later group's bytes requested into L2 meanwhile), then
// tile(r0, mr, out) multiplies mr (1..kFusedPair) activation rows from r0 with it into
// out[m * kFusedGroupRows + g]; the results go to a.y as fused_rows writes them.
template <class Hold, class Tile>
inline void held_rows(const QuantMatmulArgs& a, const Hold& hold, const Tile& tile) {
  const int64_t groups = (a.n_out + kFusedGroupRows - 1) / kFusedGroupRows;
  const int64_t group_bytes = kFusedGroupRows * a.row_bytes;
#pragma omp parallel for schedule(static)
  for (int64_t grp = 0; grp < groups; ++grp) {
    const int64_t j0 = grp * kFusedGroupRows;
    const int rows = static_cast<int>(std::min<int64_t>(kFusedGroupRows, a.n_out - j0));
    if (grp + kFusedAhead < groups) {
      const char* next = reinterpret_cast<const char*>(a.w + (grp + kFusedAhead) * group_bytes);
      for (int64_t off = 0; off < group_bytes; off += 64) _mm_prefetch(next + off, _MM_HINT_T1);
    }
    hold(j0, rows);
    for (int64_t r0 = 0; r0 < a.m; r0 += kFusedPair) {
      const int mr = static_cast<int>(std::min<int64_t>(kFusedPair, a.m - r0));
      float out[kFusedPair * kFusedGroupRows];
      tile(r0, mr, out);
      for (int m = 0; m < mr; ++m) {
        float* y = a.y + (r0 + m) * a.ldy + j0;
        for (int g = 0; g < rows; ++g)
          y[g] = a.accumulate ? y[g] + out[m * kFusedGroupRows + g] : out[m * kFusedGroupRows + g];
      }
    }
  }
}

}  // namespace kvserve::KVSERVE_KERNEL_NS::int8
