// Row-wise kernels of the decoder blocks. Raw pointers and plain sizes; no knowledge of requests.
#pragma once

#include <cstdint>

#include "kernels/kernel_level.h"

#ifdef KVSERVE_KERNEL_NS
namespace kvserve::KVSERVE_KERNEL_NS {

// x: [rows, dim], w: [dim], out: [rows, dim] (may alias x). out = x / rms(x) * w.
void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float* out);

// Rotary angles of each row's position, computed once per forward pass and shared by Q, K
// and every layer: cos_sin[r, i] = (cos, sin) of pos · freq_scale · base^(-2i/rot_dim) / f[i],
// i < rot_dim/2, where f is freq_factors (Llama 3's rope_freqs) or all ones when null.
// positions: [rows]; freq_factors: [rot_dim/2] or null; cos_sin: [rows, rot_dim] (pairs).
void rope_angles(const int32_t* positions, int64_t rows, int rot_dim, float base, float freq_scale,
                 const float* freq_factors, float* cos_sin);

// Rotary embedding in place, by the angles of rope_angles, for the first rot_dim dimensions of
// each head (the rest are left alone). Adjacent pairs (neox false): (x[2i], x[2i+1]) turn by
// angle i; NEOX order (neox true): (x[i], x[i + rot_dim/2]) turn by angle i.
// x: [rows, row_stride] with n_heads heads of head_dim starting at column 0;
// cos_sin: [rows, rot_dim] from rope_angles.
void rope(float* x, int64_t rows, int64_t row_stride, const float* cos_sin, int n_heads, int head_dim,
          int rot_dim, bool neox);

// x: [rows, dim], w, b: [dim], out: [rows, dim] (may alias x).
// out = (x - mean(x)) / sqrt(var(x) + eps) · w + b.
void layer_norm(const float* x, const float* w, const float* b, int64_t rows, int64_t dim, float eps, float* out);

// gate_up: [rows, 2·ff] (gate then up in each row), out: [rows, ff]. out = silu(gate) · up.
void silu_mul(const float* gate_up, int64_t rows, int64_t ff, float* out);

// GELU in its tanh form, 0.5·x·(1 + tanh(sqrt(2/pi)·x·(1 + 0.044715·x²))), as llama.cpp's CPU
// backend computes it: the input and the result rounded to half precision (it reads a table
// indexed by the half-precision input), 0 below -10 and x above 10. The exact function would
// move these models' log-probabilities by about 0.002 nats/token from llama.cpp's (tiny-gpt2).
// gate_up: [rows, 2·ff] (gate then up in each row), out: [rows, ff]. out = gelu(gate) · up.
void gelu_mul(const float* gate_up, int64_t rows, int64_t ff, float* out);

// x: [n], out: [n] (may alias x). out = gelu(x).
void gelu(const float* x, int64_t n, float* out);

// x: [rows, row_stride], bias: [n]: adds bias to the first n columns of every row.
void add_bias(float* x, int64_t rows, int64_t row_stride, const float* bias, int64_t n);

// x: [n], in place: x = cap · tanh(x / cap) (Gemma 2's soft cap), cap > 0.
void soft_cap(float* x, int64_t n, float cap);

// x: [n], out: [n] (may alias x). out = e^x (the vector exp the other kernels use).
void exp_array(const float* x, int64_t n, float* out);

// table: [vocab, dim], ids: [rows], out: [rows, dim].
void embed(const float* table, const int32_t* ids, int64_t rows, int64_t dim, float* out);

}  // namespace kvserve::KVSERVE_KERNEL_NS
#endif
