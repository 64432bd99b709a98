#include "kernels/ops.h"

#include "kernels/intrinsics.h"

#include <cmath>
#include <cstring>

KVSERVE_KERNEL_TARGET_BEGIN
namespace kvserve::KVSERVE_KERNEL_NS {
#include "kernels/vec_math.h"

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

void rope_angles(const int32_t* positions, int64_t rows, int rot_dim, float base, float freq_scale,
                 const float* freq_factors, float* cos_sin) {
  for (int64_t r = 0; r < rows; ++r) {
    const double pos = static_cast<double>(positions[r]) * freq_scale;
    for (int i = 0; i < rot_dim; i += 2) {
      // Angles in double: at large positions float rounding of pos·θ would shift the rotation.
      double theta = pos * std::pow(static_cast<double>(base), -static_cast<double>(i) / rot_dim);
      if (freq_factors) theta /= freq_factors[i / 2];
      cos_sin[r * rot_dim + i] = static_cast<float>(std::cos(theta));
      cos_sin[r * rot_dim + i + 1] = static_cast<float>(std::sin(theta));
    }
  }
}

void rope(float* x, int64_t rows, int64_t row_stride, const float* cos_sin, int n_heads, int head_dim,
          int rot_dim, bool neox) {
  const int half = rot_dim / 2;
#pragma omp parallel for if (rows > 4)
  for (int64_t r = 0; r < rows; ++r) {
    const float* cs = cos_sin + r * rot_dim;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + r * row_stride + static_cast<int64_t>(h) * head_dim;
      for (int i = 0; i < half; ++i) {
        float* pa = neox ? v + i : v + 2 * i;
        float* pb = neox ? v + i + half : v + 2 * i + 1;
        const float a = *pa, b = *pb, c = cs[2 * i], s = cs[2 * i + 1];
        *pa = a * c - b * s;
        *pb = a * s + b * c;
      }
    }
  }
}

void layer_norm(const float* x, const float* w, const float* b, int64_t rows, int64_t dim, float eps, float* out) {
#pragma omp parallel for if (rows > 4)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int64_t i = 0; i < dim; ++i) sum += xr[i];
    const float mean = sum / static_cast<float>(dim);
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < dim; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) o[i] = (xr[i] - mean) * inv * w[i] + b[i];
  }
}

namespace {
inline float gelu_tanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535588f;
  if (x <= -10.0f) return 0.0f;
  if (x >= 10.0f) return x;
  const float h = static_cast<float>(static_cast<_Float16>(x));
  const float y = 0.5f * h * (1.0f + std::tanh(kSqrt2OverPi * h * (1.0f + 0.044715f * h * h)));
  return static_cast<float>(static_cast<_Float16>(y));
}
}  // namespace

void gelu_mul(const float* gate_up, int64_t rows, int64_t ff, float* out) {
#pragma omp parallel for if (rows > 4)
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * ff;
    for (int64_t i = 0; i < ff; ++i) out[r * ff + i] = gelu_tanh(g[i]) * g[ff + i];
  }
}

void gelu(const float* x, int64_t n, float* out) {
#pragma omp parallel for if (n > 4096)
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_tanh(x[i]);
}

void add_bias(float* x, int64_t rows, int64_t row_stride, const float* bias, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * row_stride;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) xr[i] += bias[i];
  }
}

void soft_cap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] * inv);
}

void silu_mul(const float* gate_up, int64_t rows, int64_t ff, float* out) {
#pragma omp parallel for if (rows > 4)
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * ff;
    const float* u = g + ff;
    float* o = out + r * ff;
    int64_t i = 0;
#if KVSERVE_HAS_AVX512
    const __m512 one = _mm512_set1_ps(1.0f);
    for (; i + 16 <= ff; i += 16) {
      const __m512 gv = _mm512_loadu_ps(g + i);
      const __m512 sig = _mm512_div_ps(one, _mm512_add_ps(one, exp16(_mm512_sub_ps(_mm512_setzero_ps(), gv))));
      _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_mul_ps(gv, sig), _mm512_loadu_ps(u + i)));
    }
#endif
    for (; i < ff; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
}

void exp_array(const float* x, int64_t n, float* out) {
  int64_t i = 0;
#if KVSERVE_HAS_AVX512
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, exp16(_mm512_loadu_ps(x + i)));
#endif
  for (; i < n; ++i) out[i] = std::exp(x[i]);
}

void embed(const float* table, const int32_t* ids, int64_t rows, int64_t dim, float* out) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out + r * dim, table + static_cast<int64_t>(ids[r]) * dim, dim * sizeof(float));
}

}  // namespace kvserve::KVSERVE_KERNEL_NS
KVSERVE_KERNEL_TARGET_END
