#include "model/rope_yarn.h"

#include <algorithm>
#include <cmath>

namespace kvserve {
namespace {

// The pair index at which a rotation turns `rotations` times over n_ctx_orig positions.
float corr_dim(int n_dims, int n_ctx_orig, float rotations, float base) {
  return static_cast<float>(n_dims) * std::log(static_cast<float>(n_ctx_orig) / (rotations * 2.0f * static_cast<float>(M_PI))) /
         (2.0f * std::log(base));
}

float mscale_of(float factor, float m) { return factor <= 1.0f ? 1.0f : 0.1f * m * std::log(factor) + 1.0f; }

}  // namespace

Yarn make_yarn(int n_dims, int n_ctx_orig, float base, float factor, float beta_fast, float beta_slow,
               float ext_factor, float attn_factor, float log_mul, bool mscale_fixed) {
  Yarn y;
  y.ext_factor = ext_factor;
  y.corr_lo = std::max(0.0f, std::floor(corr_dim(n_dims, n_ctx_orig, beta_fast, base)));
  y.corr_hi = std::min(static_cast<float>(n_dims - 1), std::ceil(corr_dim(n_dims, n_ctx_orig, beta_slow, base)));
  // llama_context's attention factor, then ggml's own 1 + 0.1·ln(factor) on top when mixing.
  float attn = 1.0f;
  if (ext_factor != 0.0f) {
    if (log_mul != 0.0f) {
      const float m = mscale_fixed && log_mul != 1.0f ? log_mul : 1.0f;
      attn = mscale_of(factor, m) / mscale_of(factor, log_mul);
    } else {
      attn = mscale_of(factor, 1.0f);
    }
    attn /= 1.0f + 0.1f * std::log(factor);
  }
  attn *= attn_factor;
  y.magnitude = ext_factor != 0.0f ? attn * (1.0f + 0.1f * std::log(factor)) : attn;
  return y;
}

void yarn_rope_angles(const int32_t* positions, int64_t rows, int rot_dim, float base, float freq_scale,
                      const Yarn& yarn, float* cos_sin) {
  for (int64_t r = 0; r < rows; ++r) {
    const double pos = positions[r];
    for (int i = 0; i < rot_dim; i += 2) {
      // In double, as rope_angles: float rounding of pos·θ shifts the rotation at large positions.
      const double extrap = pos * std::pow(static_cast<double>(base), -static_cast<double>(i) / rot_dim);
      const double interp = extrap * freq_scale;
      const double ramp_y = (i / 2 - yarn.corr_lo) / std::max(0.001f, yarn.corr_hi - yarn.corr_lo);
      const double mix = (1.0 - std::min(1.0, std::max(0.0, ramp_y))) * yarn.ext_factor;
      const double theta = interp * (1.0 - mix) + extrap * mix;
      cos_sin[r * rot_dim + i] = static_cast<float>(std::cos(theta) * yarn.magnitude);
      cos_sin[r * rot_dim + i + 1] = static_cast<float>(std::sin(theta) * yarn.magnitude);
    }
  }
}

}  // namespace kvserve
