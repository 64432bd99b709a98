// Row-wise kernels of the Llama block. Raw pointers and plain sizes; no knowledge of requests.
#pragma once

#include <cstdint>

#include "kernels/kernel_level.h"

#ifdef KVSERVE_KERNEL_NS
namespace kvserve::KVSERVE_KERNEL_NS {

// x: [rows, dim], w: [dim], out: [rows, dim] (may alias x). out = x / rms(x) * w.
void rms_norm(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float* out);

// Rotary angles of each row's position, computed once per forward pass and shared by Q, K
// and every layer: cos_sin[r, i] = (cos, sin) of pos · base^(-2i/rot_dim), i < rot_dim/2.
// positions: [rows]; cos_sin: [rows, rot_dim] (pairs).
void rope_angles(const int32_t* positions, int64_t rows, int rot_dim, float base, float* cos_sin);

// Rotary embedding in place, adjacent-pair layout: (x[2i], x[2i+1]) of each head rotated by
// the angles of rope_angles for 2i < rot_dim; dimensions past rot_dim are left alone.
// x: [rows, row_stride] with n_heads heads of head_dim starting at column 0;
// cos_sin: [rows, rot_dim] from rope_angles.
void rope(float* x, int64_t rows, int64_t row_stride, const float* cos_sin, int n_heads, int head_dim,
          int rot_dim);

// gate_up: [rows, 2·ff] (gate then up in each row), out: [rows, ff]. out = silu(gate) · up.
void silu_mul(const float* gate_up, int64_t rows, int64_t ff, float* out);

// x: [n], out: [n] (may alias x). out = e^x (the vector exp the other kernels use).
void exp_array(const float* x, int64_t n, float* out);

// table: [vocab, dim], ids: [rows], out: [rows, dim].
void embed(const float* table, const int32_t* ids, int64_t rows, int64_t dim, float* out);

}  // namespace kvserve::KVSERVE_KERNEL_NS
#endif
