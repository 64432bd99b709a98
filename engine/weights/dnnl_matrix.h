// F32 and BF16 weights through oneDNN: W packed once at load into the blocked layout oneDNN
// picks for its shape, one primitive per (padded) batch height, made ahead of use. Decode-sized
// batches of F32 weights go through the small-batch kernel instead, which reads the same
// packed panels.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "common/huge_buffer.h"
#include "weights/compute_context.h"
#include "weights/weight_matrix.h"

namespace kvserve {

class DnnlMatrix final : public WeightMatrix {
 public:
  // w: [n_out, n_in] row-major (ggml's [out][in]); reordered once, held by this object.
  // bf16: hold W as BF16 (exact for weights that were BF16 in the file) and multiply in BF16
  // with F32 accumulation; each call then rounds x to BF16 first.
  DnnlMatrix(ComputeContext& ctx, const float* w, int64_t n_out, int64_t n_in, bool bf16 = false);

  void forward(const float* x, int64_t m, float* y, bool accumulate = false) override;
  void prepare(int64_t max_rows, bool accumulate) override;
  TensorType held_as() const override { return bf16_ ? TensorType::kBF16 : TensorType::kF32; }
  int64_t bytes() const override { return static_cast<int64_t>(packed_.size() + small_packed_.size()); }

  // True where batch height m goes through small_batch_matmul rather than oneDNN's matmul:
  // small m, on weights packed in the layout that kernel reads (F32 BA16a64b).
  bool uses_small_batch_kernel(int64_t m) const {
    return plan_onednn_matmul(small_batch_, m) == MatmulPath::kF32SmallBatch;
  }
  void describe_plan(std::map<std::string, std::string>& plan) const override {
    plan[tensor_type_name(held_as())] = plan_at_report_heights([&](int64_t m) { return plan_onednn_matmul(small_batch_, m); });
  }
  // For tests and benchmarks: send every batch height to oneDNN.
  void disable_small_batch_kernel() { small_batch_ = false; }

 private:
  struct Cached {
    dnnl::matmul primitive;
    dnnl::memory src, dst;
    dnnl::reorder to_bf16;     // x (F32) -> src_bf16, when the weights are BF16
    dnnl::memory src_bf16;
    std::vector<uint16_t> src_bf16_buf;
  };
  Cached& primitive_for(int64_t m, bool accumulate);

  ComputeContext* ctx_;
  bool bf16_;
  bool small_batch_ = false;  // F32: small_batch_matmul takes decode heights (packed_ or small_packed_)
  int64_t k_padded_ = 0;      // n_in rounded up to the layout's block of 16
  HugeBuffer packed_;         // the packed weights (declared before the memory that points into it)
  HugeBuffer small_packed_;   // the small-batch kernel's layout where oneDNN prefers another (else empty)
  dnnl::memory weights_mem_;  // packed
  std::unordered_map<int64_t, std::unique_ptr<Cached>> cache_;  // key: m * 2 + accumulate
};

}  // namespace kvserve
