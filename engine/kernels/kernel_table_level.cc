// Compiled once per kernel level (KVSERVE_KERNEL_NS = scalar, avx2, avx512): that level's table.
#include "kernels/attention.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul_plan.h"
#include "kernels/ops.h"
#include "kernels/int8/int8_matmul.h"
#include "kernels/quant_matmul.h"
#include "kernels/small_batch_matmul.h"

namespace kvserve::KVSERVE_KERNEL_NS {

const KernelTable& table() {
  static const KernelTable t{
      .level = KernelLevel::KVSERVE_KERNEL_LEVEL,
      .rms_norm = rms_norm,
      .rope_angles = rope_angles,
      .rope = rope,
      .layer_norm = layer_norm,
      .silu_mul = silu_mul,
      .gelu_mul = gelu_mul,
      .gelu = gelu,
      .add_bias = add_bias,
      .soft_cap = soft_cap,
      .embed = embed,
      .exp_array = exp_array,
      .small_batch_matmul = small_batch_matmul,
      .quant_matmul = quant_matmul,
      .dequantize_rows = dequantize_rows,
      .dequantize_panels = dequantize_panels,
      .matmul_type_row = matmul_type_row,
      .pack_panels = pack_panels,
      .write_kv_f32 = write_kv<float>,
      .write_kv_f16 = write_kv<_Float16>,
      .write_kv_q8 = write_kv_q8,
      .paged_attention_f32 = paged_attention<float>,
      .paged_attention_f16 = paged_attention<_Float16>,
      .paged_attention_q8 = paged_attention<int8_t>,
  };
  return t;
}

}  // namespace kvserve::KVSERVE_KERNEL_NS
