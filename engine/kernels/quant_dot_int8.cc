// Which integer kernel takes a product: the K types' (kernels/quant_kdot_int8.cc, fused for 1-4
// rows, a panel GEMM beyond), or for the 32-value block types the fused kernel at 1-4 rows
// (kernels/quant_matvec_int8.cc) and the panel GEMM beyond (kernels/quant_gemm32_int8.cc).
#include "kernels/quant_dot_int8.h"

#include <algorithm>

#include "kernels/small_batch_matmul.h"

KVSERVE_KERNEL_TARGET_BEGIN

namespace kvserve::KVSERVE_KERNEL_NS {

#if KVSERVE_HAS_AVX512
namespace {
bool cpu_has_vnni() {
  static const bool has = __builtin_cpu_supports("avx512vnni");
  return has;
}
bool cpu_has_gfni() {
  static const bool has = __builtin_cpu_supports("gfni");
  return has;
}
}  // namespace

bool int8_path_applies(uint32_t type, int64_t n_in) {
  return cpu_has_vnni() && (gemm32_int8_applies(type) || kquant_int8_applies(type)) && n_in % 64 == 0;
}

void quant_matmul_int8(const QuantMatmulArgs& a) {
  if (a.m > kSmallBatchRows) {  // the kernels' scratch holds that many rows
    for (int64_t r0 = 0; r0 < a.m; r0 += kSmallBatchRows) {
      QuantMatmulArgs part = a;
      part.x = a.x + r0 * a.n_in, part.y = a.y + r0 * a.ldy, part.m = std::min(kSmallBatchRows, a.m - r0);
      quant_matmul_int8(part);
    }
    return;
  }
  if (kquant_int8_applies(a.type))
    quant_matmul_kquant_int8(a);
  else if (a.panels)
    panels32_int8(a);
  else if (a.m <= kMatvecMaxRows && int8_matvec_applies(a.type, a.n_in))
    quant_matvec_int8(a);
  else
    quant_gemm32_int8(a);
}

// Packed Q6_K panels are unpacked with GFNI (kernels/quant_kgemm_int8.cc).
bool int8_panels_apply(uint32_t type, int64_t n_in, int64_t rows) {
  return int8_path_applies(type, n_in) && rows % 16 == 0 &&
         (static_cast<TensorType>(type) != TensorType::kQ6_K || cpu_has_gfni());
}

void pack_int8_panels(uint32_t type, uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_in) {
  if (kquant_int8_applies(type))
    pack_kquant_panels(type, w, rows, row_bytes, n_in);
  else
    pack_panels32(type, w, rows, row_bytes, n_in);
}

#else   // levels without AVX-512: the float path always
bool int8_path_applies(uint32_t, int64_t) { return false; }
void quant_matmul_int8(const QuantMatmulArgs&) {}
bool int8_panels_apply(uint32_t, int64_t, int64_t) { return false; }
void pack_int8_panels(uint32_t, uint8_t*, int64_t, int64_t, int64_t) {}
#endif

}  // namespace kvserve::KVSERVE_KERNEL_NS

KVSERVE_KERNEL_TARGET_END
