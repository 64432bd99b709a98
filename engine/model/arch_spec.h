// What distinguishes one decoder architecture from another, as data: the loader and the forward
// pass read a spec instead of testing architecture names. One row per architecture in
// arch_spec.cc; behaviour that no field can describe goes in a small file of its own.
#pragma once

#include <string>
#include <vector>

namespace kvserve {

enum class NormKind { kRms, kLayer };                  // RMSNorm, or LayerNorm with bias
enum class RopeLayout { kAdjacentPairs, kNeox, kNone };  // (2i, 2i+1), the two halves, or no rotary
enum class FfnKind { kSwiGlu, kGeGluTanh, kGelu };     // gated SiLU, gated GELU (tanh), plain GELU
enum class WindowedLayers { kNone, kAll, kEven };      // which layers <arch>.attention.sliding_window limits
// 1/sqrt of what scales q·k: the head dimension, or Gemma 2's rule (n_embd / n_head for its
// 46-layer 27B model, the head dimension otherwise; GGUF does not carry query_pre_attn_scalar).
enum class QueryScale { kHeadDim, kGemma2 };

struct ArchSpec {
  std::string name;                 // general.architecture, and the prefix of its metadata keys
  NormKind norm = NormKind::kRms;
  RopeLayout rope = RopeLayout::kAdjacentPairs;
  FfnKind ffn = FfnKind::kSwiGlu;
  bool attn_biases = false;         // Q/K/V biases are required (any projection's bias is applied where present)
  bool fused_qkv = false;           // one attn_qkv tensor (Q rows, then K, then V) instead of attn_q, attn_k, attn_v
  bool fused_gate_up = false;       // ffn_up holds gate then up (2·n_ff rows), no ffn_gate
  bool learned_positions = false;   // position_embd added to the embedding instead of rotary
  bool post_norms = false;          // post_attention_norm and post_ffw_norm before each residual add
  bool scale_embedding = false;     // embedding scaled by sqrt(n_embd)
  bool attn_logit_softcap = false;  // <arch>.attn_logit_softcapping
  bool final_logit_softcap = false; // <arch>.final_logit_softcapping
  WindowedLayers windowed = WindowedLayers::kNone;  // where <arch>.attention.sliding_window applies
  QueryScale query_scale = QueryScale::kHeadDim;
  bool output_may_be_tied = true;   // no output.weight: the embedding is the classifier

  std::string key(const std::string& suffix) const { return name + "." + suffix; }
};

// The spec of an architecture this build implements, or null.
const ArchSpec* find_arch_spec(const std::string& architecture);
// "llama, ..." for error messages.
std::string implemented_architectures();

}  // namespace kvserve
