#include "kernels/ops.h"

#include <cmath>
#include <cstring>

namespace kvserve {

void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float* out) {
#pragma omp parallel for if (rows > 4)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = xr[i] * inv * w[i];
  }
}

void rope(float* x, int64_t rows, int64_t row_stride, const int32_t* positions, int n_heads,
          int head_dim, int rot_dim, float base) {
#pragma omp parallel for if (rows > 4)
  for (int64_t r = 0; r < rows; ++r) {
    const double pos = positions[r];
    for (int i = 0; i < rot_dim; i += 2) {
      // Angles in double: at large positions float rounding of pos·θ would shift the rotation.
      const double theta = pos * std::pow(static_cast<double>(base), -static_cast<double>(i) / rot_dim);
      const float c = static_cast<float>(std::cos(theta)), s = static_cast<float>(std::sin(theta));
      for (int h = 0; h < n_heads; ++h) {
        float* v = x + r * row_stride + static_cast<int64_t>(h) * head_dim + i;
        const float a = v[0], b = v[1];
        v[0] = a * c - b * s;
        v[1] = a * s + b * c;
      }
    }
  }
}

void silu_mul(const float* gate_up, int64_t rows, int64_t ff, float* out) {
#pragma omp parallel for if (rows > 4)
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * ff;
    const float* u = g + ff;
    float* o = out + r * ff;
    for (int64_t i = 0; i < ff; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

void embed(const float* table, const int32_t* ids, int64_t rows, int64_t dim, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out + r * dim, table + static_cast<int64_t>(ids[r]) * dim, dim * sizeof(float));
}

}  // namespace kvserve
