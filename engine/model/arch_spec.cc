#include "model/arch_spec.h"

namespace kvserve {
namespace {

// Every architecture this build runs. The defaults are llama's.
const std::vector<ArchSpec>& specs() {
  static const std::vector<ArchSpec> all = {
      ArchSpec{.name = "llama"},
      ArchSpec{.name = "qwen2", .rope = RopeLayout::kNeox, .attn_biases = true},
      ArchSpec{.name = "phi3",
               .rope = RopeLayout::kNeox,
               .fused_qkv = true,
               .fused_gate_up = true,
               .window_period = 1},
      ArchSpec{.name = "gemma2",
               .rope = RopeLayout::kNeox,
               .ffn = FfnKind::kGeGluTanh,
               .post_norms = true,
               .scale_embedding = true,
               .attn_logit_softcap = true,
               .final_logit_softcap = true,
               .window_period = 2,
               .embd_query_scale_layers = 46},
      ArchSpec{.name = "qwen3", .rope = RopeLayout::kNeox, .qk_norm = true},
      ArchSpec{.name = "qwen3moe", .rope = RopeLayout::kNeox, .qk_norm = true, .moe = true, .moe_normalize = true},
      ArchSpec{.name = "gemma3",
               .rope = RopeLayout::kNeox,
               .ffn = FfnKind::kGeGluTanh,
               .qk_norm = true,
               .post_norms = true,
               .scale_embedding = true,
               .final_logit_softcap = true,
               .window_period = 6,
               .window_period_key = true,
               .local_rope_base = true,
               .embd_query_scale_layers = 62},
      ArchSpec{.name = "gpt-oss",
               .rope = RopeLayout::kNeox,
               .ffn = FfnKind::kSwiGluOai,
               .attn_biases = true,
               .window_period = 2,
               .window_period_key = true,
               .output_may_be_tied = false,
               .moe = true,
               .moe_gating = MoeGating::kSoftmaxOfChosen,
               .ffn_norm = "post_attention_norm",
               .attn_sinks = true},
      ArchSpec{.name = "deepseek2",
               .attn = AttnKind::kLatent,
               .moe = true,
               .yarn_mscale_fixed = true,
               .moe_keys = true},
      ArchSpec{.name = "gpt2",
               .norm = NormKind::kLayer,
               .rope = RopeLayout::kNone,
               .ffn = FfnKind::kGelu,
               .attn_biases = true,
               .fused_qkv = true,
               .learned_positions = true},
  };
  return all;
}

}  // namespace

const ArchSpec* find_arch_spec(const std::string& architecture) {
  for (const ArchSpec& s : specs())
    if (s.name == architecture) return &s;
  return nullptr;
}

std::string implemented_architectures() {
  std::string out;
  for (const ArchSpec& s : specs()) out += (out.empty() ? "" : ", ") + s.name;
  return out;
}

}  // namespace kvserve
