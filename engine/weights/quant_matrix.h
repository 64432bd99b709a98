// A weight matrix held in its file's tensor types (F16, BF16, F32 or ggml's block types, one per
// stacked part), not widened: decode-sized batches go through the quantized small-batch kernel
// (kernels/quant_matmul.h), which streams the stored bytes once per step; prompt-sized batches
// take the integer GEMM (the types of kernels/int8/int8_matmul.h, on AVX-512 VNNI) 64 rows at a
// time, else decode panels of rows to float and multiply them with oneDNN's GEMM. Which kernel
// runs at which height is kernels/matmul_plan.h's plan_matmul.
#pragma once

#include <vector>

#include "kernels/matmul_plan.h"
#include "weights/compute_context.h"
#include "weights/weight_matrix.h"

namespace kvserve {

class QuantMatrix final : public WeightMatrix {
 public:
  // Rows stacked in order, each part in its own type; the bytes live in ctx.arena (or anywhere
  // that outlives the matrix).
  using Part = HeldRows;
  // int8_activations: WeightPolicy::int8_activations.
  QuantMatrix(ComputeContext& ctx, std::vector<Part> parts, int64_t n_in, bool int8_activations = false);

  void forward(const float* x, int64_t m, float* y, bool accumulate = false) override;
  void prepare(int64_t max_rows, bool accumulate) override;
  int64_t private_scratch_bytes(int64_t m) const override;
  void forward_private(const float* x, int64_t m, float* y, uint8_t* scratch, ByteSpan then = {}) override;
  ByteSpan first_read() const override;
  TensorType held_as() const override;  // the type of most of the bytes
  int64_t bytes() const override;
  int64_t panel_bytes() const override;
  void count_bytes(std::map<TensorType, int64_t>& by_type) const override;
  void describe_plan(std::map<std::string, std::string>& plan) const override;
  const std::vector<Part>& parts() const { return parts_; }

  // Rows decoded per GEMM panel: bounded scratch (a few MiB) whatever the matrix.
  int64_t panel_rows() const;

 private:
  // Whether the part takes the integer path, which then serves every height (else: the float
  // small-batch kernel, and decoded panels for prompts), and the path at m rows
  // (kernels/matmul_plan.h decides both).
  bool int8_path(const Part& p) const;
  MatmulPath path(const Part& p, int64_t m) const;

  ComputeContext* ctx_;
  std::vector<Part> parts_;
  bool int8_activations_;
};

}  // namespace kvserve
