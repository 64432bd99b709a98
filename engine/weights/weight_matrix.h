// One weight matrix of a model, behind one interface whatever its stored type: y (+)= x · Wᵀ.
// make_weight_matrix reads the tensor(s) of a file and a policy and picks the implementation;
// a new weight format is a row in tensor_types.h plus an implementation here.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/small_batch_matmul.h"

namespace kvserve {

struct ComputeContext;

// How weights are held in memory (the model's options, once for all its matrices).
struct WeightPolicy {
  // BF16 weights stay BF16 where the CPU multiplies BF16 natively (model.keep_bf16); otherwise
  // they are widened to F32, exactly.
  bool keep_bf16 = false;
  // Weights held in a block type multiply activations rounded to 8 bits per block (32 values, or
  // 256 for the K types, as llama.cpp does; integer products, kernels/int8/int8_matmul.h) where the
  // CPU has AVX-512 VNNI (model.int8_activations); false: float activations, the exact product.
  bool int8_activations = true;
  // Matrices on that integer path, and F16 ones, are held as packed panels where the kernels
  // allow it (model.repack_weights; kernels/quant_matmul.h's pack_panels).
  bool repack = true;
};

// Bytes of weights in memory: what a product reads first (WeightMatrix::first_read).
struct ByteSpan {
  const uint8_t* data = nullptr;
  int64_t bytes = 0;
};

class WeightMatrix {
 public:
  virtual ~WeightMatrix() = default;

  // x: [padded_rows(m), n_in], y: [padded_rows(m), n_out]; rows past m are scratch: their
  // contents are anything and their results are not meaningful. accumulate: y += x·Wᵀ (the
  // residual add) rather than y = x·Wᵀ.
  virtual void forward(const float* x, int64_t m, float* y, bool accumulate = false) = 0;
  // Readies everything a forward of up to max_rows rows, with this accumulate, needs (JIT,
  // scratch), so that no step compiles kernels or allocates.
  virtual void prepare(int64_t max_rows, bool accumulate) = 0;
  // Several matrices multiplied at once on different threads (a mixture's experts): the bytes of
  // scratch a forward of m rows needs when it is given its own (forward_private), sharing nothing
  // with other calls; -1 where this matrix cannot (then forward alone is used).
  virtual int64_t private_scratch_bytes(int64_t /*m*/) const { return -1; }
  // y = x·Wᵀ for m rows (at most kSmallBatchRows: no padded rows) with `scratch` of
  // private_scratch_bytes(m) bytes; safe beside other such calls on other matrices. then: what
  // the caller reads next (another matrix's first_read()), requested into cache while this
  // product's last bytes are read; a hint.
  virtual void forward_private(const float* x, int64_t m, float* y, uint8_t* /*scratch*/, ByteSpan /*then*/ = {}) {
    forward(x, m, y);
  }
  // The bytes a product begins by reading, for forward_private's `then` (empty: not known).
  virtual ByteSpan first_read() const { return {}; }
  virtual TensorType held_as() const = 0;  // the type the weights are held and multiplied in
  virtual int64_t bytes() const = 0;       // bytes of weights one forward streams
  virtual int64_t panel_bytes() const { return 0; }  // of those, held as packed panels
  // Adds this matrix's bytes, by the type each part is held in, to `by_type`.
  virtual void count_bytes(std::map<TensorType, int64_t>& by_type) const { by_type[held_as()] += bytes(); }
  // Sets plan[what is held] to the kernels its products take at the report's heights
  // (kernels/matmul_plan.h): "Q4_K (panels)" -> "k_packed x5", "F32" -> "onednn".
  virtual void describe_plan(std::map<std::string, std::string>& plan) const = 0;

  int64_t n_in() const { return n_in_; }
  int64_t n_out() const { return n_out_; }

  // The rows forward may touch for a batch of m: implementations run a few batch heights only.
  // Above the small-batch kernel's range m is rounded up to a multiple of 16 (64 past 512
  // rows); one compiled kernel per height ever seen would have a long-lived server compiling
  // mid-step and holding gigabytes of them.
  static int64_t padded_rows(int64_t m) {
    if (m <= kSmallBatchRows) return m;
    const int64_t q = m <= 512 ? 16 : 64;
    return (m + q - 1) / q * q;
  }

 protected:
  WeightMatrix(int64_t n_out, int64_t n_in) : n_out_(n_out), n_in_(n_in) {}
  int64_t n_out_, n_in_;
};

// A tensor of a file and the shape (ggml order: [n_in, rows]) the model expects of it; or one
// matrix of a stacked 3-D tensor (a mixture's experts: dims [n_in, rows, n], matrix `slice`).
struct TensorRef {
  std::string name;
  std::vector<uint64_t> dims;
  int64_t slice = -1;  // the matrix [dims[0], dims[1]] number `slice` of a 3-D tensor; -1: all of it
};

// The matrix whose rows are the named tensors' rows, stacked in order (fused Q/K/V, gate+up).
// GgufError names the file and tensor when one is missing, misshapen, or of a type this build
// cannot load.
std::unique_ptr<WeightMatrix> make_weight_matrix(ComputeContext& ctx, const GgufFile& file,
                                                 const std::vector<TensorRef>& parts, const WeightPolicy& policy);
// The same from values already decoded (w: [n_out, n_in]; `stored`: their type in the file), so
// a tied output matrix reuses the embedding the model decoded once.
std::unique_ptr<WeightMatrix> make_weight_matrix(ComputeContext& ctx, const float* w, int64_t n_out, int64_t n_in,
                                                 TensorType stored, const WeightPolicy& policy);
// A tensor as float32 (norm weights, the embedding), checked against the expected shape.
std::vector<float> load_float_tensor(const GgufFile& file, const TensorRef& ref);

// Rows of a tensor held as the file stores them ([rows, row_bytes], each row n values).
struct HeldRows {
  TensorType type = TensorType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t row_bytes = 0;
  // The bytes are packed panels (kernels/quant_matmul.h's pack_panels): only the panel
  // products read them (the integer path's, or F16's).
  bool panels = false;
  // Row r decoded to out: [n] (n the row's length). Rows held as panels throw std::logic_error.
  void decode_row(int64_t r, float* out, int64_t n) const;
};
// The tensor's bytes copied into ctx's arena, checked as make_weight_matrix checks them; with
// as_panels, packed into panels where the kernel plan multiplies panels with int8_activations
// (plan_packs; never for rows also looked up).
HeldRows hold_tensor(ComputeContext& ctx, const GgufFile& file, const TensorRef& ref, bool as_panels = false,
                     bool int8_activations = true);
// The matrix over held rows (stacked in order; n_in values each), as make_weight_matrix builds
// it for tensors that are not all F32 or all BF16: a tied output reuses the held embedding.
std::unique_ptr<WeightMatrix> make_held_matrix(ComputeContext& ctx, std::vector<HeldRows> parts, int64_t n_in,
                                               const WeightPolicy& policy);

}  // namespace kvserve
