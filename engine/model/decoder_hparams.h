// The hyperparameters of a decoder, read from the GGUF keys of its architecture
// (<arch>.embedding_length, ...) as its ArchSpec says. Every key under the architecture's prefix
// must be one this build understands and every value one it implements: anything else is
// refused at load, naming the key, rather than silently ignored.
#pragma once

#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/arch_spec.h"
#include "model/model.h"
#include "model/rope_yarn.h"

namespace kvserve {

struct DecoderHparams : ModelHparams {
  const ArchSpec* spec = nullptr;
  int32_t q_dim = 0;             // n_head · head_dim (not always n_embd: Gemma 2's key_length)
  int32_t rope_dim = 0;          // <arch>.rope.dimension_count (default: head_dim)
  float rope_base = 10000.0f;    // <arch>.rope.freq_base
  float rope_freq_scale = 1.0f;  // 1 / <arch>.rope.scaling.factor for linear and YaRN scaling
  Yarn yarn;                     // YaRN's mix and magnitude (ext_factor 0: none)
  float yarn_log_mul = 0.0f;     // rope.scaling.yarn_log_multiplier (DeepSeek-V2's: / 0.1)
  // The rotations layers use: [0] rope_base with rope_freq_scale; [1], where the spec has
  // local_rope_base, the windowed layers' base without scaling.
  struct Rope {
    float base = 10000.0f;
    float freq_scale = 1.0f;
    Yarn yarn;  // ext_factor 0 and magnitude 1: plain rotation
    bool plain() const { return yarn.ext_factor == 0.0f && yarn.magnitude == 1.0f; }
  };
  std::vector<Rope> ropes;
  // What one layer's attention part does differently from the others.
  struct LayerAttention {
    int32_t window = 0;  // positions it sees, its own included (0: all)
    int32_t rope = 0;    // index into ropes
  };
  std::vector<LayerAttention> layer_attn;  // [n_layer]
  float norm_eps = 1e-5f;        // layer_norm_rms_epsilon or layer_norm_epsilon, by the spec's norm
  float attn_scale = 1.0f;       // multiplies q·k
  float embed_scale = 1.0f;      // multiplies the token embedding
  float attn_soft_cap = 0.0f;    // <arch>.attn_logit_softcapping (0: none)
  float final_soft_cap = 0.0f;   // <arch>.final_logit_softcapping (0: none)
  bool tied_output = false;      // no output.weight: the embedding doubles as the classifier
  // A mixture of experts (spec->moe): how tokens are routed, and each expert's FFN width
  // (<arch>.expert_feed_forward_length). routing.n_expert 0: every layer's FFN is dense.
  MoeRouting routing;
  int32_t n_ff_expert = 0;
  int32_t n_dense_lead = 0;  // leading layers whose FFN is dense in a mixture (DeepSeek-V2)
  int32_t n_ff_shared = 0;   // the shared experts' SwiGLU width on every MoE layer (0: none)
  int32_t v_dim = 0;         // each head's attention output: head_dim, or MLA's v_head_dim

  // The window of layer l's attention (0: it sees every position).
  int32_t window_of(int layer) const { return layer_attn[layer].window; }

  // GgufError names the file and the key, tensor or value that is missing, wrong or not implemented.
  static DecoderHparams from_gguf(const GgufFile& file);
};

}  // namespace kvserve
