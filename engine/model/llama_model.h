// The `llama` architecture as GGUF describes it: RMSNorm, rotary embedding (adjacent pairs),
// causal self-attention with any number of KV heads dividing the query heads, SwiGLU, and a
// tied or separate output matrix. Weights are loaded once; forward() runs a mixed batch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gguf.h"
#include "kernels/matmul.h"
#include "kv_cache/kv_storage.h"
#include "model/batch.h"

namespace kvserve {

struct LlamaHparams {
  std::string name;           // general.name
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t n_ff = 0;
  int32_t n_ctx_train = 0;    // llama.context_length
  int32_t rope_dim = 0;       // llama.rope.dimension_count (default: head_dim)
  float rope_base = 10000.0f; // llama.rope.freq_base
  float rms_eps = 1e-5f;
  bool tied_output = false;   // no output.weight: the embedding doubles as the classifier
  TensorType weight_type = TensorType::kF32;  // as stored in the file
  TensorType held_as = TensorType::kF32;      // as held in memory: BF16 where the CPU multiplies it natively
  int64_t n_params = 0;

  static LlamaHparams from_gguf(const GgufFile& file);
};

class LlamaModel {
 public:
  // Reads hyperparameters and weights; GgufError names the tensor or key that is wrong.
  // keep_bf16: hold BF16 weights as BF16 where the CPU multiplies BF16 natively (else F32).
  // kernels: the kernel set every step runs (default: the best this CPU supports).
  explicit LlamaModel(const GgufFile& file, bool keep_bf16 = false,
                      const KernelTable& kernels = kernel_table(best_supported_level()));

  const LlamaHparams& hparams() const { return hp_; }
  KvShape kv_shape() const { return {hp_.n_layer, hp_.n_head_kv, hp_.head_dim, 4}; }

  // Runs every token of the batch through the model, storing each token's K/V at its slot
  // first, and returns logits [in.logit_rows.size(), n_vocab] (valid until the next call).
  const float* forward(const BatchInputs& in, KvStorage& kv);
  // Builds every matmul primitive for batch heights 1..max_rows now, so that the first steps
  // at each batch size do not stall on JIT compilation.
  void warm_up(int64_t max_rows);

 private:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;
    std::unique_ptr<Linear> qkv, wo, gate_up, down;
  };

  // Head ablation: zeroes, in attn_, the outputs of the heads each token's mask names at this layer.
  void zero_masked_heads(const BatchInputs& in, int layer, int64_t rows);

  LlamaHparams hp_;
  const KernelTable& k_;
  std::unique_ptr<DnnlContext> dnnl_;
  std::vector<float> embedding_;  // [n_vocab, n_embd]
  std::vector<float> out_norm_;
  std::unique_ptr<Linear> output_;
  std::vector<Layer> layers_;
  // Activations, grown to the largest batch seen and reused (no allocation per step).
  std::vector<float> x_, h_, qkv_, attn_, gu_, act_, last_, logits_;
  std::vector<float> rope_cs_;  // [T, rope_dim] this step's rotary cos/sin pairs, shared by all layers
  std::vector<int32_t> ctx_lens_;
  std::vector<float*> cap_ptrs_;     // [T] this layer's attention-capture destinations
  std::vector<int64_t> cap_strides_; // [T] their head strides
};

}  // namespace kvserve
