// y (+)= x · Wᵀ with W held in a file's tensor type (F32, F16, BF16 or any ggml block type the
// tensor-type table decodes), for the weight matrices that are not oneDNN-packed.
//
// Decode-sized batches (up to kSmallBatchRows rows): each thread streams its own run of output
// rows once per call, decodes a few rows' chunk at a time into L1 and applies every row of x to
// it there, so the weights cross the memory bus once per step however many rows the batch has.
// Larger batches decode panels of rows to float for a GEMM (weights/quant_matrix.cc).
#pragma once

#include <cstdint>

#include "kernels/kernel_level.h"

namespace kvserve {

// One run of rows of a weight matrix in one stored type.
struct QuantMatmulArgs {
  uint32_t type = 0;             // ggml type id (codecs/tensor_types.h)
  const uint8_t* w = nullptr;    // [n_out, row_bytes]: each row n_in values in the type's blocks
  int64_t row_bytes = 0;
  int64_t n_out = 0, n_in = 0;   // n_in a multiple of the type's block size
  const float* x = nullptr;      // [m, n_in]
  int64_t m = 0;
  float* y = nullptr;            // [m, ldy]; columns [0, n_out) written
  int64_t ldy = 0;
  bool accumulate = false;       // y += x·Wᵀ rather than y = x·Wᵀ
  // Round x to 8 bits per block of 32 and multiply in integers where this level can
  // (kernels/int8/int8_matmul.h); scratch then holds int8_scratch_bytes(m, n_in) bytes.
  bool int8_activations = false;
  void* scratch = nullptr;
  // w holds packed panels (pack_panels): the integer path's layout (int8_activations then set),
  // or F16's (kernels/f16_panels.cc).
  bool panels = false;
  // Bytes the caller reads next (another matrix's first; whoever names them keeps them to
  // kNextReadBytes), requested into L2 while this product's last bytes are read, so that the
  // next product does not begin by waiting for memory. Null for none; a hint, read by the
  // few-row panel kernels.
  const uint8_t* then = nullptr;
  int64_t then_bytes = 0;
};
// At most this many bytes of the next read are requested ahead (QuantMatmulArgs::then): about
// a few panels' bytes, what the first steps of the next product read.
constexpr int64_t kNextReadBytes = int64_t{64} << 10;

}  // namespace kvserve

#ifdef KVSERVE_KERNEL_NS
namespace kvserve::KVSERVE_KERNEL_NS {

// The product, by the kernel plan_matmul (kernels/matmul_plan.h) names; kDecodedGemm's heights
// are decoded to float panels by the weights (weights/quant_matrix.cc) and, called here, take
// the decode-in-L1 kernel, which works at any height.
void quant_matmul(const QuantMatmulArgs& args);
// Rows [0, rows) of w ([rows, row_bytes] in `type`) decoded to out: [rows, n_in], in parallel.
void dequantize_rows(uint32_t type, const uint8_t* w, int64_t row_bytes, int64_t rows, int64_t n_in, float* out);
// Packed panels: 16 rows at a time rewritten in place, to the same bytes, in the order the
// product reads them, so that it streams them at the memory's read rate (the integer kernels'
// types, kernels/int8/int8_matmul.h; F16, whose products are float, kernels/f16_panels.cc).
// plan_packs (kernels/matmul_plan.h) says which matrices are held so; every product with them
// then takes quant_matmul with a.panels set.
// w: [rows, row_bytes] in `type`, packed in place (plan_packs must hold).
void pack_panels(uint32_t type, uint8_t* w, int64_t rows, int64_t row_bytes, int64_t n_in);
// The same for rows held as packed panels (pack_panels; rows a multiple of 16).
void dequantize_panels(uint32_t type, const uint8_t* w, int64_t rows, int64_t n_in, float* out);

// F16 as packed panels (kernels/f16_panels.cc; AVX-512 levels): packing w ([rows, n_in]
// halves, rows a multiple of 16) in place, the product at any height (a.panels), and the rows
// back as floats (out: [rows, n_in]).
void pack_f16_panels(uint8_t* w, int64_t rows, int64_t n_in);
void f16_panels_matmul(const QuantMatmulArgs& a);
void dequantize_f16_panels(const uint8_t* w, int64_t rows, int64_t n_in, float* out);

}  // namespace kvserve::KVSERVE_KERNEL_NS
#endif
