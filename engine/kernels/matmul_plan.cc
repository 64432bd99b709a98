#include "kernels/matmul_plan.h"

#include <stdexcept>

#include "kernels/kernel_table.h"
#include "kernels/small_batch_matmul.h"

namespace kvserve {

MatmulCpu detect_matmul_cpu() {
  __builtin_cpu_init();
  return MatmulCpu{.avx512_vnni = __builtin_cpu_supports("avx512vnni") != 0,
                   .gfni = __builtin_cpu_supports("gfni") != 0};
}

const MatmulCpu& matmul_cpu() {
  static const MatmulCpu cpu = detect_matmul_cpu();
  return cpu;
}

bool plan_int8(const MatmulTypeRow& row, const MatmulCpu& cpu, int64_t n_in, bool int8_activations) {
  // The integer kernels step through a row 64 values (two 32-value blocks) at a time.
  return int8_activations && row.int8 && row.family != MatmulFamily::kFloat &&
         (!row.int8_needs_avx512_vnni || cpu.avx512_vnni) && n_in % 64 == 0;
}

bool plan_packs(const MatmulTypeRow& row, const MatmulCpu& cpu, int64_t n_in, int64_t rows, bool int8_activations) {
  if (!row.packs || rows % 16 != 0) return false;
  if (row.packs_need_gfni && !cpu.gfni) return false;
  // Float panels (F16) are multiplied in float; block panels only by the integer kernels.
  return row.family == MatmulFamily::kFloat || plan_int8(row, cpu, n_in, int8_activations);
}

MatmulPath plan_matmul(const MatmulTypeRow& row, const MatmulCpu& cpu, const MatmulCase& c) {
  // Prompt heights take the float path where the level's integer kernels measured slower than
  // oneDNN's GEMM over decoded panels (int8_prompts; docs/performance.md).
  if (plan_int8(row, cpu, c.n_in, c.int8_activations) && (row.int8_prompts || c.panels || c.m <= kSmallBatchRows)) {
    const bool k = row.family == MatmulFamily::kBlockK;
    if (c.panels) return k ? MatmulPath::kKPacked : MatmulPath::kQ32Packed;
    if (k && row.int8_lanes && c.m > kSmallBatchRows) return MatmulPath::kKLanes;
    if (c.m <= row.fused_rows || !row.int8_gemm) return k ? MatmulPath::kKFused : MatmulPath::kQ32Fused;
    return k ? MatmulPath::kKGemm : MatmulPath::kQ32Gemm;
  }
  if (c.panels) {
    if (row.family == MatmulFamily::kFloat && row.packs) return MatmulPath::kF16Packed;
    throw std::logic_error("plan_matmul: packed panels of a type no kernel here multiplies so");
  }
  if (c.m > kSmallBatchRows) return MatmulPath::kDecodedGemm;
  if (row.f16_rows && c.m <= kFusedMaxRows) return MatmulPath::kF16Rows;
  return MatmulPath::kDecodeL1;
}

bool is_int8_path(MatmulPath path) {
  switch (path) {
    case MatmulPath::kQ32Fused: case MatmulPath::kQ32Gemm: case MatmulPath::kQ32Packed:
    case MatmulPath::kKFused: case MatmulPath::kKGemm: case MatmulPath::kKPacked: case MatmulPath::kKLanes: return true;
    default: return false;
  }
}

const char* matmul_path_name(MatmulPath path) {
  switch (path) {
    case MatmulPath::kDecodeL1: return "decode_l1";
    case MatmulPath::kDecodedGemm: return "decoded_gemm";
    case MatmulPath::kF16Rows: return "f16_rows";
    case MatmulPath::kF16Packed: return "f16_packed";
    case MatmulPath::kQ32Fused: return "q32_fused";
    case MatmulPath::kQ32Gemm: return "q32_gemm";
    case MatmulPath::kQ32Packed: return "q32_packed";
    case MatmulPath::kKFused: return "k_fused";
    case MatmulPath::kKGemm: return "k_gemm";
    case MatmulPath::kKPacked: return "k_packed";
    case MatmulPath::kKLanes: return "k_lanes";
    case MatmulPath::kF32SmallBatch: return "f32_small_batch";
    case MatmulPath::kOnednn: return "onednn";
  }
  return "unknown";
}

const MatmulTypeRow& matmul_row(const KernelTable& k, uint32_t type) {
  const MatmulTypeRow* row = k.matmul_type_row(type);
  if (!row) throw std::logic_error("matmul_row: no kernels for " + tensor_type_label(type));
  return *row;
}

bool plan_int8(const KernelTable& k, uint32_t type, int64_t n_in, bool int8_activations) {
  const MatmulTypeRow* row = k.matmul_type_row(type);
  return row && plan_int8(*row, matmul_cpu(), n_in, int8_activations);
}

bool plan_packs(const KernelTable& k, uint32_t type, int64_t n_in, int64_t rows, bool int8_activations) {
  const MatmulTypeRow* row = k.matmul_type_row(type);
  return row && plan_packs(*row, matmul_cpu(), n_in, rows, int8_activations);
}

MatmulPath plan_matmul(const KernelTable& k, uint32_t type, const MatmulCase& c) {
  return plan_matmul(matmul_row(k, type), matmul_cpu(), c);
}

MatmulPath plan_onednn_matmul(bool small_batch_layout, int64_t m) {
  return small_batch_layout && m <= kSmallBatchRows ? MatmulPath::kF32SmallBatch : MatmulPath::kOnednn;
}

std::string plan_at_report_heights(const KernelTable& k, uint32_t type, int64_t n_in, bool panels,
                                   bool int8_activations) {
  return plan_at_report_heights([&](int64_t m) {
    return plan_matmul(k, type, {.n_in = n_in, .m = m, .panels = panels, .int8_activations = int8_activations});
  });
}

std::string plan_at_report_heights(const std::function<MatmulPath(int64_t m)>& plan) {
  std::string out;
  const char* last = nullptr;
  int repeats = 0;
  const auto flush = [&] {
    if (!last) return;
    if (!out.empty()) out += ' ';
    out += last;
    if (repeats > 1) out += " x" + std::to_string(repeats);
  };
  for (int64_t m : kPlanReportHeights) {
    const char* name = matmul_path_name(plan(m));
    if (last && std::string(name) == last) {
      ++repeats;
      continue;
    }
    flush();
    last = name, repeats = 1;
  }
  flush();
  return out;
}

}  // namespace kvserve
