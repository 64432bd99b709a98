// What distinguishes one decoder architecture from another, as data: the loader and the forward
// pass read a spec instead of testing architecture names. One row per architecture in
// arch_spec.cc; behaviour that no field can describe goes in a small file of its own.
//
// A decoder layer is an attention part followed by an FFN part. The spec picks the kind of
// each (and their options); what differs from layer to layer (sliding window, rotary base and
// scaling) is per-layer data that DecoderHparams derives from the spec and the file's keys.
#pragma once

#include <string>
#include <vector>

#include "model/moe_routing.h"

namespace kvserve {

enum class NormKind { kRms, kLayer };                  // RMSNorm, or LayerNorm with bias
enum class RopeLayout { kAdjacentPairs, kNeox, kNone };  // (2i, 2i+1), the two halves, or no rotary
// Grouped-query multi-head attention over a K/V cache, or DeepSeek-V2's multi-head latent
// attention (model/mla_attention.h) over a cache of one latent and one rotary key per token.
enum class AttnKind { kMultiHead, kLatent };
// gated SiLU, gated GELU (tanh), plain GELU, gpt-oss's clamped gated SiLU (model/activations.h)
enum class FfnKind { kSwiGlu, kGeGluTanh, kGelu, kSwiGluOai };

struct ArchSpec {
  std::string name;                 // general.architecture, and the prefix of its metadata keys
  NormKind norm = NormKind::kRms;
  RopeLayout rope = RopeLayout::kAdjacentPairs;
  AttnKind attn = AttnKind::kMultiHead;
  FfnKind ffn = FfnKind::kSwiGlu;
  bool attn_biases = false;         // Q/K/V biases are required (any projection's bias is applied where present)
  bool qk_norm = false;             // attn_q_norm/attn_k_norm: RMSNorm of every Q and K head before rotary
  bool fused_qkv = false;           // one attn_qkv tensor (Q rows, then K, then V) instead of attn_q, attn_k, attn_v
  bool fused_gate_up = false;       // ffn_up holds gate then up (2·n_ff rows), no ffn_gate
  bool learned_positions = false;   // position_embd added to the embedding instead of rotary
  bool post_norms = false;          // post_attention_norm and post_ffw_norm before each residual add
  bool scale_embedding = false;     // embedding scaled by sqrt(n_embd)
  bool attn_logit_softcap = false;  // <arch>.attn_logit_softcapping is read
  bool final_logit_softcap = false; // <arch>.final_logit_softcapping is read
  // Which layers <arch>.attention.sliding_window limits: none (0), every layer (1), or with a
  // period P > 1 layer l when l % P < P - 1 (P - 1 local layers, then one global).
  int32_t window_period = 0;
  bool window_period_key = false;   // <arch>.attention.sliding_window_pattern may set the period
  // Windowed layers rotate with <arch>.rope.freq_base_swa (default 10,000) and no scaling; the
  // others with rope.freq_base and the file's scaling (Gemma 3).
  bool local_rope_base = false;
  // The query scale is 1/sqrt(n_embd / n_head) instead of 1/sqrt(head_dim) for a model of this
  // many layers (Gemma's largest model; GGUF does not carry query_pre_attn_scalar); 0: never.
  int32_t embd_query_scale_layers = 0;
  bool output_may_be_tied = true;   // no output.weight: the embedding is the classifier
  // A mixture of experts (ffn_gate_inp and the stacked ffn_gate_exps, ffn_up_exps,
  // ffn_down_exps; model/moe_ffn.h) is every layer's FFN; its gating, and whether the chosen
  // weights are renormalised to sum 1 (fixed by the architecture, as llama.cpp fixes them).
  bool moe = false;
  MoeGating moe_gating = MoeGating::kSoftmax;
  bool moe_normalize = false;
  // The norm in front of the FFN part: ffn_norm, or gpt-oss's post_attention_norm (which there
  // is not a post-norm).
  std::string ffn_norm = "ffn_norm";
  // attn_sinks: a learned logit per head that joins each softmax's denominator (gpt-oss).
  bool attn_sinks = false;
  // YaRN's magnitude read as DeepSeek-V2 reads rope.scaling.yarn_log_multiplier (rope_yarn.h):
  // the file holds 0.1 x mscale_all_dim, and the query scale carries DeepSeek's mscale squared.
  bool yarn_mscale_fixed = false;
  // DeepSeek-V2's mixture: <arch>.expert_gating_func picks the gating (1 softmax, 2 sigmoid),
  // <arch>.expert_weights_norm the renormalisation; <arch>.expert_shared_count shared experts
  // (ffn_*_shexp, one SwiGLU of that many experts' width) run on every token beside the routed
  // ones; the first <arch>.leading_dense_block_count layers have a dense FFN instead.
  bool moe_keys = false;

  std::string key(const std::string& suffix) const { return name + "." + suffix; }
};

// The spec of an architecture this build implements, or null.
const ArchSpec* find_arch_spec(const std::string& architecture);
// "llama, ..." for error messages.
std::string implemented_architectures();

}  // namespace kvserve
