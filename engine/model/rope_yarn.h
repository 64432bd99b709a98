// YaRN rotary scaling as llama.cpp applies it (ggml's rope with ext_factor, and the attention
// factor llama_context derives): each rotary pair's angle mixes the interpolated angle
// (position / factor) and the original one by a ramp over the pair index, and cos and sin are
// scaled by one magnitude. Computed once per step for every position, like rope_angles.
#pragma once

#include <cstdint>

namespace kvserve {

struct Yarn {
  float ext_factor = 0.0f;  // 0: plain linear scaling (no mix, magnitude 1)
  float corr_lo = 0.0f;     // the ramp: pairs below corr_lo keep the original angle,
  float corr_hi = 0.0f;     // pairs above corr_hi the interpolated one
  float magnitude = 1.0f;   // cos and sin multiplied by it
};

// The YaRN of an n_dims-wide rotation trained at n_ctx_orig positions and stretched by
// `factor`: beta_fast/beta_slow bound the ramp (rotations per context), attn_factor multiplies
// the magnitude (1 + 0.1·ln factor, or DeepSeek's ratio when log_mul is not 0; llama.cpp's
// rope.scaling.yarn_log_multiplier), mscale_fixed: DeepSeek-V2's reading of that ratio.
Yarn make_yarn(int n_dims, int n_ctx_orig, float base, float factor, float beta_fast, float beta_slow,
               float ext_factor, float attn_factor, float log_mul, bool mscale_fixed);

// cos_sin: [rows, rot_dim] (cos, sin) of each rotary pair at each position, as rope_angles.
void yarn_rope_angles(const int32_t* positions, int64_t rows, int rot_dim, float base, float freq_scale,
                      const Yarn& yarn, float* cos_sin);

}  // namespace kvserve
