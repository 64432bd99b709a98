// Which kernel multiplies a weight matrix held in its file's type. One function, plan_matmul,
// decides from the type's row at the kernel level in use (MatmulTypeRow: its family and which
// kernels the level has for it), the CPU's extensions, the layout the rows are held in and the
// batch height; the weights ask it what to pack at load and which way to multiply at each
// product, quant_matmul asks it which kernel to run, and the start-up report prints it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "codecs/tensor_types.h"
#include "kernels/kernel_level.h"

namespace kvserve {

struct KernelTable;
struct QuantMatmulArgs;

// How a type's blocks meet 8-bit activations: kBlock32 blocks of 32 values with one scale (the
// activations rounded per 32, as llama.cpp's Q8_0), kBlockK super-blocks of 256 with sub-block
// scales (rounded per 256, as its Q8_K); kFloat types are multiplied in float only.
enum class MatmulFamily : uint8_t { kFloat, kBlock32, kBlockK };

enum class MatmulPath : uint8_t {
  kDecodeL1,     // a few rows' chunks decoded to float in L1 and multiplied there (any type, level)
  kDecodedGemm,  // panels of rows decoded to float, then oneDNN's GEMM (prompt heights, float path)
  kF16Rows,      // F16 widened in registers, 1-4 rows (AVX-512)
  kF16Packed,    // F16 held as 16-row panels, any height (AVX-512)
  kQ32Fused,     // 32-value blocks, integer products, 1-4 rows read straight from the file's layout
  kQ32Gemm,      // 32-value blocks, integer panel GEMM unpacked per call (5 rows and more)
  kQ32Packed,    // 32-value blocks held as packed panels, any height
  kKFused,       // K super-blocks, 1-4 rows from the file's layout
  kKGemm,        // K super-blocks, panel GEMM unpacked per call
  kKPacked,      // K super-blocks held as packed panels, any height
  kKLanes,       // K super-blocks, eight weight rows a vector unpacked per call (AVX2 levels' prompts)
  kF32SmallBatch,  // F32 in oneDNN's 64-column panels read by our small-batch kernel (decode heights)
  kOnednn,         // oneDNN's matmul (F32, BF16)
};

// The activation rows up to which the fused kernels take a product (MatmulTypeRow::fused_rows).
constexpr int64_t kFusedMaxRows = 4;

// A type's integer kernels at one level (kernels/int8/int8_matmul.h), null where the level has
// none: quant_matmul runs the one plan_matmul picks, pack_panels the packer.
struct Int8Kernels {
  void (*fused)(const QuantMatmulArgs& a) = nullptr;   // kQ32Fused, kKFused
  void (*gemm)(const QuantMatmulArgs& a) = nullptr;    // kQ32Gemm, kKGemm (a batch kernel)
  void (*packed)(const QuantMatmulArgs& a) = nullptr;  // kQ32Packed, kKPacked
  void (*lanes)(const QuantMatmulArgs& a) = nullptr;   // kKLanes
  // w: [rows, row_bytes] in the type's blocks (rows a multiple of 16), rewritten as packed panels.
  void (*pack)(uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_in) = nullptr;
};

// One tensor type at one kernel level: the facts its kernels and the plan read, and the kernels
// themselves (ggml keeps the same per type in type_traits_cpu). Each level has one table of them
// (matmul_type_row); the flags say what the plan may choose, the kernels are what it then runs
// (test_matmul_plan checks that they agree).
struct MatmulTypeRow {
  TensorType type = TensorType::kF32;
  MatmulFamily family = MatmulFamily::kFloat;
  // This level's fastest exact decoder: src [n / block_size] blocks, dst [n] floats.
  void (*decode)(const void* src, float* dst, int64_t n) = nullptr;
  bool int8 = false;             // integer kernels here
  bool int8_gemm = false;        // a batch kernel above fused_rows rows (else the fused kernel up to
                                 // kSmallBatchRows)
  int64_t fused_rows = kFusedMaxRows;  // heights up to which the fused kernel takes a product when there
                                       // is a batch kernel: where the fused kernel's unpacking is dear
                                       // (MXFP4's table lookup on AVX-512), the batch kernel's, done once
                                       // for all rows, pays from 3 rows
  bool int8_prompts = false;     // heights above kSmallBatchRows on the integer path too (else decoded
                                 // panels and oneDNN's GEMM, where that measured faster)
  bool int8_lanes = false;       // those heights by the eight-rows-a-vector kernel (kKLanes)
  bool int8_needs_avx512_vnni = false;  // the integer kernels use AVX-512 VNNI (checked at run time)
  bool packs = false;            // a packed-panel layout and its product here
  bool packs_need_gfni = false;  // the packed panels are unpacked with GFNI instructions
  bool f16_rows = false;         // the F16 1-4 row kernel
  Int8Kernels int8_kernels{};
};

// The CPU extensions the plan depends on beyond the kernel level.
struct MatmulCpu {
  bool avx512_vnni = false;
  bool gfni = false;
};
MatmulCpu detect_matmul_cpu();
const MatmulCpu& matmul_cpu();  // this CPU's, detected once

// One product: width, batch height, the rows' layout, and model.int8_activations.
struct MatmulCase {
  int64_t n_in = 0;
  int64_t m = 1;
  bool panels = false;
  bool int8_activations = true;
};

// Whether products take the integer kernels (at every height where the level has them: see
// MatmulTypeRow::int8_prompts).
bool plan_int8(const MatmulTypeRow& row, const MatmulCpu& cpu, int64_t n_in, bool int8_activations);
// Whether a matrix of `rows` rows is held as packed panels (rewritten once at load).
bool plan_packs(const MatmulTypeRow& row, const MatmulCpu& cpu, int64_t n_in, int64_t rows, bool int8_activations);
MatmulPath plan_matmul(const MatmulTypeRow& row, const MatmulCpu& cpu, const MatmulCase& c);
bool is_int8_path(MatmulPath path);
const char* matmul_path_name(MatmulPath path);  // "k_packed", "decode_l1", ...

// The same through a level's table and this CPU (`type` a TensorType id the level loads).
const MatmulTypeRow& matmul_row(const KernelTable& k, uint32_t type);
bool plan_int8(const KernelTable& k, uint32_t type, int64_t n_in, bool int8_activations = true);
bool plan_packs(const KernelTable& k, uint32_t type, int64_t n_in, int64_t rows, bool int8_activations = true);
MatmulPath plan_matmul(const KernelTable& k, uint32_t type, const MatmulCase& c);

// F32 and BF16 matrices oneDNN holds (weights/dnnl_matrix.h): our small-batch kernel up to
// kSmallBatchRows rows where oneDNN packed them in the layout it reads, oneDNN's matmul else.
MatmulPath plan_onednn_matmul(bool small_batch_layout, int64_t m);

// The heights the start-up report shows the plan at.
constexpr int64_t kPlanReportHeights[] = {1, 4, 16, 64, 512};
// "k_fused k_fused k_gemm k_gemm k_gemm" (kPlanReportHeights; repeats folded: "k_packed x5").
std::string plan_at_report_heights(const KernelTable& k, uint32_t type, int64_t n_in, bool panels,
                                   bool int8_activations);
std::string plan_at_report_heights(const std::function<MatmulPath(int64_t m)>& plan);

}  // namespace kvserve

#ifdef KVSERVE_KERNEL_NS
namespace kvserve::KVSERVE_KERNEL_NS {
// This level's row for a TensorType id, or null where it multiplies no such type
// (kernels/matmul_types.cc).
const MatmulTypeRow* matmul_type_row(uint32_t type);
}  // namespace kvserve::KVSERVE_KERNEL_NS
#endif
