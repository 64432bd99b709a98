// FFN activations the kernel table does not carry (elementwise, a small share of a step).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace kvserve {

// gpt-oss's clamped SwiGLU, as llama.cpp's swiglu_oai: with g = min(gate, 7) and
// u = clamp(up, -7, 7), out = g · sigmoid(1.702 g) · (u + 1). gate_up: [rows, 2·ff] (gate
// columns, then up); out: [rows, ff].
inline void swiglu_oai(const float* gate_up, int64_t rows, int64_t ff, float* out) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * ff;
    const float* u = g + ff;
    float* o = out + r * ff;
    for (int64_t i = 0; i < ff; ++i) {
      const float x = std::min(g[i], kLimit), y = std::clamp(u[i], -kLimit, kLimit);
      o[i] = x / (1.0f + std::exp(-kAlpha * x)) * (y + 1.0f);
    }
  }
}

}  // namespace kvserve
