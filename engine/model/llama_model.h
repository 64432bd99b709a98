// The `llama` architecture as GGUF describes it: RMSNorm, rotary embedding (adjacent pairs),
// causal self-attention with any number of KV heads dividing the query heads, SwiGLU, and a
// tied or separate output matrix. Weights are loaded once; forward() runs a mixed batch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/kernel_table.h"
#include "kv_cache/kv_storage.h"
#include "model/batch.h"
#include "model/model.h"
#include "weights/weight_matrix.h"

namespace kvserve {

struct LlamaHparams : ModelHparams {
  int32_t rope_dim = 0;       // llama.rope.dimension_count (default: head_dim)
  float rope_base = 10000.0f; // llama.rope.freq_base
  float rms_eps = 1e-5f;
  bool tied_output = false;   // no output.weight: the embedding doubles as the classifier

  static LlamaHparams from_gguf(const GgufFile& file);
};

class LlamaModel final : public Model {
 public:
  // Reads hyperparameters and weights; GgufError names the tensor or key that is wrong.
  // policy: how weights are held and multiplied (weights/weight_matrix.h).
  // kernels: the kernel set every step runs (default: the best this CPU supports).
  explicit LlamaModel(const GgufFile& file, const WeightPolicy& policy = {},
                      const KernelTable& kernels = kernel_table(best_supported_level()));
  ~LlamaModel() override;

  const ModelHparams& hparams() const override { return hp_; }
  const LlamaHparams& llama_hparams() const { return hp_; }
  KvShape kv_shape() const override { return {hp_.n_layer, hp_.n_head_kv, hp_.head_dim, 4}; }
  const float* forward(const BatchInputs& in, KvStorage& kv) override;
  void warm_up(int64_t max_rows) override;
  KernelLevel kernels() const override { return k_.level; }

 private:
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;
    std::unique_ptr<WeightMatrix> qkv, wo, gate_up, down;
  };

  // Head ablation: zeroes, in attn_, the outputs of the heads each token's mask names at this layer.
  void zero_masked_heads(const BatchInputs& in, int layer, int64_t rows);

  LlamaHparams hp_;
  const KernelTable& k_;
  std::unique_ptr<ComputeContext> ctx_;
  std::vector<float> embedding_;  // [n_vocab, n_embd] when the file's is F32 or BF16
  HeldRows embedding_held_;       // otherwise as stored, each token's row decoded on lookup
  std::vector<float> out_norm_;
  std::unique_ptr<WeightMatrix> output_;
  std::vector<Layer> layers_;
  // Activations, grown to the largest batch seen and reused (no allocation per step).
  std::vector<float> x_, h_, qkv_, attn_, gu_, act_, last_, logits_;
  std::vector<float> rope_cs_;  // [T, rope_dim] this step's rotary cos/sin pairs, shared by all layers
  std::vector<int32_t> ctx_lens_;
  std::vector<float*> cap_ptrs_;     // [T] this layer's attention-capture destinations
  std::vector<int64_t> cap_strides_; // [T] their head strides
};

}  // namespace kvserve
