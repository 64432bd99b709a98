#include "weights/dnnl_matrix.h"

namespace kvserve {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

DnnlMatrix::DnnlMatrix(ComputeContext& ctx, const float* w, int64_t n_out, int64_t n_in, bool bf16)
    : WeightMatrix(n_out, n_in), ctx_(&ctx), bf16_(bf16) {
  const dt wt = bf16_ ? dt::bf16 : dt::f32;
  // The [n_out, n_in] rows are exactly a [n_in, n_out] matrix in column-major ("ba") order.
  memory::desc plain_desc({n_in_, n_out_}, dt::f32, tag::ba);
  memory plain(plain_desc, ctx_->engine, const_cast<float*>(w));
  // Ask oneDNN for its preferred weight layout (format "any"); it does not depend on the batch
  // height, so one packed copy serves every primitive of this matrix.
  memory::desc sd({1, n_in_}, wt, tag::ab), dd({1, n_out_}, dt::f32, tag::ab);
  memory::desc any({n_in_, n_out_}, wt, tag::any);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(sd, any, dd), ctx_->engine);
  packed_ = HugeBuffer(pd.weights_desc().get_size());
  weights_mem_ = memory(pd.weights_desc(), ctx_->engine, packed_.data());
  dnnl::reorder(plain, weights_mem_).execute(ctx_->stream, plain, weights_mem_);
  ctx_->stream.wait();
  const memory::desc small_desc({n_in_, n_out_}, dt::f32, tag::BA16a64b);
  small_batch_ = !bf16_;
  if (small_batch_ && pd.weights_desc() != small_desc) {
    // oneDNN's AVX2 GEMM packs in another layout: the small-batch kernel gets its own copy, so that
    // decode heights take it on every CPU (a row's product the same in any batch, as there).
    small_packed_ = HugeBuffer(small_desc.get_size());
    memory small(small_desc, ctx_->engine, small_packed_.data());
    dnnl::reorder(plain, small).execute(ctx_->stream, plain, small);
    ctx_->stream.wait();
  }
  k_padded_ = (n_in_ + 15) / 16 * 16;
}

DnnlMatrix::Cached& DnnlMatrix::primitive_for(int64_t m, bool accumulate) {
  int64_t key = m * 2 + (accumulate ? 1 : 0);
  auto it = cache_.find(key);
  if (it != cache_.end()) return *it->second;
  memory::desc sd({m, n_in_}, bf16_ ? dt::bf16 : dt::f32, tag::ab);
  memory::desc dd({m, n_out_}, dt::f32, tag::ab);
  dnnl::matmul::desc d(sd, weights_mem_.get_desc(), dd);
  dnnl::primitive_attr attr;
  if (accumulate) {
    dnnl::post_ops ops;
    ops.append_sum(1.0f);
    attr.set_post_ops(ops);
  }
  dnnl::matmul::primitive_desc pd(d, attr, ctx_->engine);
  auto c = std::make_unique<Cached>();
  c->primitive = dnnl::matmul(pd);
  c->dst = memory(dd, ctx_->engine, DNNL_MEMORY_NONE);
  if (bf16_) {
    c->src = memory(memory::desc({m, n_in_}, dt::f32, tag::ab), ctx_->engine, DNNL_MEMORY_NONE);
    c->src_bf16_buf.resize(static_cast<size_t>(m * n_in_));
    c->src_bf16 = memory(sd, ctx_->engine, c->src_bf16_buf.data());
    c->to_bf16 = dnnl::reorder(c->src, c->src_bf16);
  } else {
    c->src = memory(sd, ctx_->engine, DNNL_MEMORY_NONE);
  }
  return *cache_.emplace(key, std::move(c)).first->second;
}

void DnnlMatrix::prepare(int64_t max_rows, bool accumulate) {
  for (int64_t m = 1; m <= max_rows; ++m)
    if (!uses_small_batch_kernel(m)) primitive_for(padded_rows(m), accumulate);
}

void DnnlMatrix::forward(const float* x, int64_t m, float* y, bool accumulate) {
  if (m == 0) return;
  if (uses_small_batch_kernel(m)) {
    const HugeBuffer& panels = small_packed_.size() > 0 ? small_packed_ : packed_;
    ctx_->kernels->small_batch_matmul(x, m, static_cast<const float*>(panels.data()), n_out_, n_in_, k_padded_, y, accumulate);
    return;
  }
  Cached& c = primitive_for(padded_rows(m), accumulate);
  c.src.set_data_handle(const_cast<float*>(x));
  c.dst.set_data_handle(y);
  if (bf16_) c.to_bf16.execute(ctx_->stream, c.src, c.src_bf16);
  c.primitive.execute(ctx_->stream, {{DNNL_ARG_SRC, bf16_ ? c.src_bf16 : c.src},
                                     {DNNL_ARG_WEIGHTS, weights_mem_},
                                     {DNNL_ARG_DST, c.dst}});
  ctx_->stream.wait();
}

}  // namespace kvserve
