// y = x · Wᵀ through oneDNN, with W prepared once at load and one primitive per batch height M
// cached and reused (M changes every step; K and N never do).
#pragma once

#include <dnnl.hpp>

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "huge_buffer.h"
#include "kernels/kernel_table.h"
#include "kernels/small_batch_matmul.h"

namespace kvserve {

// The oneDNN engine and stream that every matmul of one model shares, and its kernel set.
struct DnnlContext {
  explicit DnnlContext(const KernelTable& k) : kernels(&k) {}
  const KernelTable* kernels;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  // True where the CPU multiplies BF16 natively (AVX-512 BF16 or AMX): BF16 weights then stay
  // BF16 in memory, half the bytes each step streams.
  bool bf16_native = (static_cast<unsigned>(dnnl::get_effective_cpu_isa()) &
                      static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16)) ==
                     static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
};

class Linear {
 public:
  // w: [n_out, n_in] row-major (ggml's [out][in]); reordered once into the blocked layout
  // oneDNN picks for this shape (the same for every batch height), held by this object.
  // bf16: hold W as BF16 (exact for weights that were BF16 in the file) and multiply in BF16
  // with F32 accumulation; each call then rounds x to BF16 first.
  Linear(DnnlContext& ctx, const float* w, int64_t n_out, int64_t n_in, bool bf16 = false);
  Linear(Linear&&) = default;

  // x: [padded_rows(m), n_in], y: [padded_rows(m), n_out]; rows past m are scratch: their
  // contents are anything and their results are not meaningful. accumulate: y += x·Wᵀ (the
  // residual add, fused as a post-op).
  void forward(const float* x, int64_t m, float* y, bool accumulate = false);

  // The rows forward may touch for a batch of m. oneDNN's primitives are made for a few batch
  // heights only: above the small-batch kernel's range, m is rounded up to a multiple of 16
  // (64 past 512 rows). One primitive per height ever seen would have a long-lived server
  // compiling kernels mid-step and holding gigabytes of them after an hour of varied prompts.
  static int64_t padded_rows(int64_t m) {
    if (m <= kSmallBatchRows) return m;
    const int64_t q = m <= 512 ? 16 : 64;
    return (m + q - 1) / q * q;
  }
  // Creates (JIT-compiles) the primitive for batch height m ahead of its first use.
  void prepare(int64_t m, bool accumulate) {
    if (!uses_small_batch_kernel(m)) primitive_for(padded_rows(m), accumulate);
  }
  // True where batch height m goes through small_batch_matmul rather than oneDNN's matmul:
  // small m, on weights packed in the layout that kernel reads (F32 BA16a64b).
  bool uses_small_batch_kernel(int64_t m) const { return small_batch_ && m <= kSmallBatchRows; }
  // For tests and benchmarks: send every batch height to oneDNN.
  void disable_small_batch_kernel() { small_batch_ = false; }

  int64_t n_in() const { return n_in_; }
  int64_t n_out() const { return n_out_; }

 private:
  struct Cached {
    dnnl::matmul primitive;
    dnnl::memory src, dst;
    dnnl::reorder to_bf16;     // x (F32) -> src_bf16, when the weights are BF16
    dnnl::memory src_bf16;
    std::vector<uint16_t> src_bf16_buf;
  };
  Cached& primitive_for(int64_t m, bool accumulate);

  DnnlContext* ctx_;
  int64_t n_out_, n_in_;
  bool bf16_;
  bool small_batch_ = false;  // the packed layout is the one small_batch_matmul reads
  int64_t k_padded_ = 0;      // n_in rounded up to the layout's block of 16
  HugeBuffer packed_;         // the packed weights (declared before the memory that points into it)
  dnnl::memory weights_mem_;  // packed
  std::unordered_map<int64_t, std::unique_ptr<Cached>> cache_;  // key: m * 2 + accumulate
};

}  // namespace kvserve
