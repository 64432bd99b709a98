// One decoder-only transformer for every architecture in arch_spec.cc: the spec's fields pick
// the norm (RMS or LayerNorm), the rotary layout (adjacent pairs, NEOX, none: learned
// positions), the FFN (SwiGLU, GELU-gated, plain GELU), fused or separate projections, biases,
// Gemma's post-norms and soft caps, Q/K head norms, per-layer windows and rotations, and a
// mixture of experts in place of the dense FFN. Weights are loaded once; forward() runs a mixed
// batch.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/kernel_table.h"
#include "kv_cache/kv_storage.h"
#include "model/batch.h"
#include "model/decoder_hparams.h"
#include "model/mla_attention.h"
#include "model/model.h"
#include "model/moe_ffn.h"
#include "weights/weight_matrix.h"

namespace kvserve {

class DecoderModel final : public Model {
 public:
  // Reads hyperparameters and weights; GgufError names the key or tensor that is wrong, and
  // any tensor of the file the architecture does not use.
  // policy: how weights are held and multiplied (weights/weight_matrix.h).
  // kernels: the kernel set every step runs (default: the best this CPU supports).
  explicit DecoderModel(const GgufFile& file, const WeightPolicy& policy = {},
                        const KernelTable& kernels = kernel_table(best_supported_level()));
  ~DecoderModel() override;

  const ModelHparams& hparams() const override { return hp_; }
  const DecoderHparams& decoder_hparams() const { return hp_; }
  KvShape kv_shape() const override {
    return {hp_.n_layer, hp_.n_head_kv, hp_.head_dim, 4, hp_.mla.on() ? hp_.mla.kv_lora_rank : 0};
  }
  const float* forward(const BatchInputs& in, KvStorage& kv) override;
  void warm_up(int64_t max_rows) override;
  KernelLevel kernels() const override { return k_.level; }

 private:
  // A norm's weight, and its bias for LayerNorm (empty for RMSNorm); empty weight: absent.
  struct Norm {
    std::vector<float> w, b;
  };
  // A layer's attention part: Q/K/V in one matrix, optional head norms, the output projection;
  // or latent attention (then qkv is null).
  struct AttnPart {
    std::unique_ptr<MlaAttention> mla;
    std::unique_ptr<WeightMatrix> qkv, wo;
    std::vector<float> qkv_bias, wo_bias;  // empty where the file has none
    std::vector<float> q_norm, k_norm;     // [head_dim] RMSNorm weights of every Q / K head, or empty
    std::vector<float> sinks;              // [n_head] attention-sink logits, or empty
  };
  // A layer's FFN part: gate and up in one matrix (up alone for plain GELU), then down; or a
  // mixture of experts, with gate_up and down its shared experts (null where it has none).
  struct FfnPart {
    int64_t ff = 0;  // the width of gate_up's gate (or up) part
    std::unique_ptr<WeightMatrix> gate_up, down;
    std::vector<float> gate_up_bias, down_bias;  // empty where the file has none
    std::unique_ptr<MoeFfn> moe;
  };
  struct Layer {
    Norm attn_norm, ffn_norm, post_attn_norm, post_ffn_norm;
    AttnPart attn;
    FfnPart ffn;
  };

  void norm(const Norm& n, const float* x, int64_t rows, float* out) const;
  // x_ += post_norm(w·in + bias) for the rows; an empty bias or post-norm is left out. h_ is scratch.
  void add_to_residual(WeightMatrix& w, const std::vector<float>& bias, const Norm& post_norm, const float* in,
                       int64_t rows);
  // The attention part of layer l on h_ (normed input), its output added to x_.
  void run_attention(const BatchInputs& in, KvStorage& kv, int l);
  // The FFN part of layer l on h_, its output added to x_.
  void run_ffn(int l, int64_t rows);
  // Stores this step's K/V rows (k, v: [T, kv_stride]; v null for a latent cache) and attends
  // with the queries q ([T, q_stride]) into out ([T, n_head·width of a head's output]).
  void attend(const BatchInputs& in, KvStorage& kv, int layer, const float* q, int64_t q_stride, const float* k,
              const float* v, int64_t kv_stride, float* out);
  // q8_0 caches: kv_anchor_ from anchor_token_ alone at position 0 (run once, on a scratch f32 cache).
  void compute_kv_anchor();
  // Head ablation: zeroes, in attn_, the outputs of the heads each token's mask names at this layer.
  void zero_masked_heads(const BatchInputs& in, int layer, int64_t rows);

  DecoderHparams hp_;
  const KernelTable& k_;
  std::unique_ptr<ComputeContext> ctx_;
  std::vector<float> embedding_;  // [n_vocab, n_embd] when the file's is F32
  HeldRows embedding_held_;       // otherwise as stored, each token's row decoded on lookup
  std::vector<float> positions_;  // [max_positions, n_embd] learned position embeddings, or empty
  std::vector<float> rope_freqs_; // [rope_dim / 2] Llama 3's per-frequency divisors, or empty
  Norm out_norm_;
  std::unique_ptr<WeightMatrix> output_;
  std::vector<float> output_bias_;
  std::vector<Layer> layers_;
  // Activations, grown to the largest batch seen and reused (no allocation per step).
  std::vector<float> x_, h_, qkv_, attn_, gu_, act_, last_, logits_;
  std::vector<float> mla_q_, mla_rows_, mla_o_;  // latent attention's absorbed queries, cache rows, latent outputs
  std::vector<float> rope_cs_;  // [ropes, T, rope_dim] this step's rotary cos/sin pairs, per rotation
  std::vector<int32_t> ctx_lens_;
  std::vector<float*> cap_ptrs_;     // [T] this layer's attention-capture destinations
  std::vector<int64_t> cap_strides_; // [T] their head strides
  // What a q8_0 cache takes off before rounding (every K row, position 0's V row) and attention
  // adds back: anchor_token_'s K and V at position 0, [n_layer, 2, n_kv·head_dim]. The token is
  // BOS, which most prompts begin with (token 0 where the file names none). K's channels carry
  // offsets every token shares that would otherwise set each block's scale, and BOS, the token
  // attention leans on most, is then held almost exactly.
  int32_t anchor_token_ = 0;
  std::vector<float> kv_anchor_;
};

}  // namespace kvserve
