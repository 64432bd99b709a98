// y (+)= x · Wᵀ for the few rows of a decode step, straight from the packed weights oneDNN made.
//
// Why: a decode step's batch is small, and oneDNN 2.6's matmul then streams the weights from
// memory at well under the bandwidth it reaches for one row, although each weight it loads
// could serve every row of the step. Here each thread streams its own run of 64-output panels
// once and applies every row to a panel while it is in cache.
#pragma once

#include <cstdint>

#include "kernels/kernel_level.h"

namespace kvserve {

// Rows up to which the model uses this kernel; oneDNN takes larger batches (prompts): at 64
// rows it is still faster than oneDNN on the 110M shape's matrices (docs/performance.md).
constexpr int64_t kSmallBatchRows = 64;

}  // namespace kvserve

#ifdef KVSERVE_KERNEL_NS
namespace kvserve::KVSERVE_KERNEL_NS {

// x: [m, k]. w: oneDNN's f32 BA16a64b layout of the [k, n] weight matrix: for each panel of 64
// outputs, [k_padded, 64] contiguous (k_padded = k rounded up to 16, n padded to 64, padding
// zero). y: [m, n]; accumulate adds to it (the residual) rather than overwriting it.
void small_batch_matmul(const float* x, int64_t m, const float* w, int64_t n, int64_t k, int64_t k_padded, float* y,
                        bool accumulate);

}  // namespace kvserve::KVSERVE_KERNEL_NS
#endif
