// kvserve-mkmodel: writes a synthetic GGUF model (llama, qwen3, qwen3moe, deepseek2 or gemma3) of any shape.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "gguf/quant_presets.h"
#include "model/synthetic.h"

int main(int argc, char** argv) {
  CLI::App app{"Write a synthetic GGUF model (llama, qwen3, qwen3moe, deepseek2 or gemma3 architecture) with deterministic random "
               "weights"};
  kvserve::SyntheticSpec spec;
  std::string out, dtype = "f32";
  app.add_option("--out", out, "output GGUF path")->required();
  app.add_option("--arch", spec.arch, "architecture: llama, qwen3, qwen3moe, deepseek2 or gemma3")->capture_default_str();
  app.add_option("--dim", spec.dim, "embedding width")->capture_default_str();
  app.add_option("--layers", spec.layers, "transformer blocks")->capture_default_str();
  app.add_option("--heads", spec.heads, "query heads")->capture_default_str();
  app.add_option("--kv-heads", spec.kv_heads, "KV heads (divides heads)")->capture_default_str();
  app.add_option("--head-dim", spec.head_dim, "head dimension (0: dim / heads; qwen3 and gemma3 may differ)")
      ->capture_default_str();
  app.add_option("--ffn", spec.ffn, "feed-forward width")->capture_default_str();
  app.add_option("--experts", spec.experts, "qwen3moe, deepseek2: experts per layer")->capture_default_str();
  app.add_option("--experts-used", spec.experts_used, "qwen3moe, deepseek2: experts each token is routed to")
      ->capture_default_str();
  app.add_option("--expert-ffn", spec.expert_ffn, "qwen3moe, deepseek2: each expert's hidden width")
      ->capture_default_str();
  app.add_option("--kv-lora", spec.kv_lora, "deepseek2: the cached latent's width")->capture_default_str();
  app.add_option("--qk-rope", spec.qk_rope, "deepseek2: rotary dims of each query and of the shared key")
      ->capture_default_str();
  app.add_option("--qk-nope", spec.qk_nope, "deepseek2: each head's no-rotary query/key dims")->capture_default_str();
  app.add_option("--v-head", spec.v_head, "deepseek2: each head's value width")->capture_default_str();
  app.add_option("--shared-experts", spec.shared_experts, "deepseek2: shared experts")->capture_default_str();
  app.add_option("--dense-layers", spec.dense_layers, "deepseek2: leading layers with a dense FFN")
      ->capture_default_str();
  app.add_option("--window", spec.window, "gemma3: sliding window of the local layers")->capture_default_str();
  app.add_option("--window-period", spec.window_period, "gemma3: period - 1 local layers, then one global")
      ->capture_default_str();
  app.add_option("--vocab", spec.vocab, "vocabulary size (>= 259)")->capture_default_str();
  app.add_option("--vocab-from", spec.vocab_from,
                 "a GGUF whose tokenizer becomes the model's (padded to --vocab with joined pieces)");
  app.add_option("--context", spec.context, "context length")->capture_default_str();
  app.add_option("--dtype", dtype, "weight type: a preset of kvserve-quantize (" + kvserve::quant_preset_names() + ")")
      ->capture_default_str();
  app.add_option("--seed", spec.seed, "weight seed")->capture_default_str();
  app.add_flag("--tied", spec.tied_output, "no output.weight: the embedding is the classifier");
  app.add_flag("--copier", spec.copier,
               "llama: weights that copy the context (greedy: the token that followed the last two tokens before)");
  CLI11_PARSE(app, argc, argv);
  try {
    kvserve::write_synthetic_model(spec, out, dtype);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvserve-mkmodel: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "wrote %s\n", out.c_str());
  return 0;
}
