// One table of function pointers per kernel set. The kernel sources (attention, small-batch
// matmul, row ops) are compiled once per level, each into its own namespace with its own
// -march (engine/CMakeLists.txt), so one portable binary carries all of them; the model picks a
// table once at load and calls through it. Shapes are those of the kernels' own headers.
#pragma once

#include <cstdint>

#include "kernels/attention_args.h"
#include "kernels/cpu_features.h"
#include "kernels/matmul_plan.h"
#include "kernels/quant_matmul.h"

namespace kvserve {

struct KernelTable {
  KernelLevel level;
  // kernels/ops.h
  void (*rms_norm)(const float* x, const float* w, int64_t rows, int64_t dim, float eps, float* out);
  void (*rope_angles)(const int32_t* positions, int64_t rows, int rot_dim, float base, float freq_scale,
                      const float* freq_factors, float* cos_sin);
  void (*rope)(float* x, int64_t rows, int64_t row_stride, const float* cos_sin, int n_heads, int head_dim,
               int rot_dim, bool neox);
  void (*layer_norm)(const float* x, const float* w, const float* b, int64_t rows, int64_t dim, float eps,
                     float* out);
  void (*silu_mul)(const float* gate_up, int64_t rows, int64_t ff, float* out);
  void (*gelu_mul)(const float* gate_up, int64_t rows, int64_t ff, float* out);
  void (*gelu)(const float* x, int64_t n, float* out);
  void (*add_bias)(float* x, int64_t rows, int64_t row_stride, const float* bias, int64_t n);
  void (*soft_cap)(float* x, int64_t n, float cap);
  void (*embed)(const float* table, const int32_t* ids, int64_t rows, int64_t dim, float* out);
  void (*exp_array)(const float* x, int64_t n, float* out);
  // kernels/small_batch_matmul.h
  void (*small_batch_matmul)(const float* x, int64_t m, const float* w, int64_t n, int64_t k, int64_t k_padded,
                             float* y, bool accumulate);
  // kernels/quant_matmul.h
  void (*quant_matmul)(const QuantMatmulArgs& args);
  void (*dequantize_rows)(uint32_t type, const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t n_in, float* out);
  void (*dequantize_panels)(uint32_t type, const uint8_t* w, int64_t rows, int64_t n_in, float* out);
  // kernels/matmul_plan.h: this level's facts of a tensor type (null: no kernels for it), which
  // plan_matmul reads to choose the kernel quant_matmul runs; packing a matrix plan_packs allows
  const MatmulTypeRow* (*matmul_type_row)(uint32_t type);
  void (*pack_panels)(uint32_t type, uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_in);
  // kernels/attention.h, for each KV element type
  void (*write_kv_f32)(const float* k, const float* v, int64_t rows, int64_t row_stride, const int64_t* slots,
                       int n_kv, int head_dim, int block_size, float* k_cache, float* v_cache);
  void (*write_kv_f16)(const float* k, const float* v, int64_t rows, int64_t row_stride, const int64_t* slots,
                       int n_kv, int head_dim, int block_size, _Float16* k_cache, _Float16* v_cache);
  void (*write_kv_q8)(const float* k, const float* v, int64_t rows, int64_t row_stride, const int64_t* slots,
                      const int32_t* positions, const float* k_anchor, const float* v_anchor, int n_kv, int head_dim,
                      int block_size, int8_t* k_cache, int8_t* v_cache, uint16_t* k_scales, uint16_t* v_scales);
  void (*paged_attention_f32)(const PagedAttentionArgs<float>& args);
  void (*paged_attention_f16)(const PagedAttentionArgs<_Float16>& args);
  void (*paged_attention_q8)(const PagedAttentionArgs<int8_t>& args);

  // The KV element type's pair, for code generic over it.
  auto write_kv(float*) const { return write_kv_f32; }
  auto write_kv(_Float16*) const { return write_kv_f16; }
  void paged_attention(const PagedAttentionArgs<float>& a) const { paged_attention_f32(a); }
  void paged_attention(const PagedAttentionArgs<_Float16>& a) const { paged_attention_f16(a); }
  void paged_attention(const PagedAttentionArgs<int8_t>& a) const { paged_attention_q8(a); }
};

// The table of `level`; the CPU must support it (cpu_supports).
const KernelTable& kernel_table(KernelLevel level);

}  // namespace kvserve
