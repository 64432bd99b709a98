// Synthetic GGUF models (llama, qwen3, qwen3moe, deepseek2 or gemma3 architecture): any shape, deterministic random
// weights, and a byte-level SentencePiece-style vocab (byte tokens plus filler pieces). How a
// machine without downloads gets a model, and how benchmarks get models of realistic size.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf.h"

namespace kvserve {

struct SyntheticSpec {
  // "llama", "qwen3" (Q/K head norms), "qwen3moe" (qwen3's attention, a mixture of experts in
  // every layer), "deepseek2" (latent attention; leading dense layers, then mixtures with shared
  // experts) or "gemma3" (also windowed layers)
  std::string arch = "llama";
  int32_t dim = 64;         // embedding width
  int32_t layers = 2;
  int32_t heads = 4;
  int32_t kv_heads = 4;     // must divide heads
  int32_t head_dim = 0;     // 0: dim / heads (qwen3 and gemma3 may differ)
  int32_t ffn = 172;        // gated FFN hidden width
  int32_t experts = 8;      // qwen3moe: experts per layer,
  int32_t experts_used = 2; // the top k each token is routed to,
  int32_t expert_ffn = 64;  // and each expert's hidden width
  int32_t kv_lora = 64;     // deepseek2: the cached latent's width,
  int32_t qk_rope = 16;     // the rotary dims of each query and of the key shared by the heads,
  int32_t qk_nope = 32;     // each head's no-rotary query/key dims,
  int32_t v_head = 32;      // each head's value width,
  int32_t shared_experts = 1;  // the shared experts (their SwiGLU is shared_experts x expert_ffn wide),
  int32_t dense_layers = 1;    // and the leading layers with a dense FFN (ffn wide)
  int32_t window = 1024;    // gemma3: the sliding window of its local layers
  int32_t window_period = 6;  // gemma3: period - 1 local layers, then one global
  int32_t vocab = 512;      // at least 259 (3 specials + 256 bytes)
  int32_t context = 2048;   // llama.context_length
  TensorType dtype = TensorType::kF32;  // of the 2-D weights; norms stay F32
  uint64_t seed = 1;
  bool tied_output = false; // leave out output.weight (the embedding is the classifier)
  // A GGUF whose tokenizer.* keys become this model's vocabulary (empty: the byte-level one).
  // Tokens past its own, up to `vocab`, are two of its tokens joined: text the encoder never
  // makes but a model may sample, as large vocabularies' long pieces are.
  std::string vocab_from = {};
  // Llama only: weights that copy the context (model/synthetic_copier.h) instead of random ones.
  bool copier = false;
};

// Throws std::invalid_argument naming the field when the shape is impossible.
void validate(const SyntheticSpec& spec);
void write_synthetic_model(const SyntheticSpec& spec, const std::string& path);
// The same model in a llama-quantize preset ("Q4_K_M", "F16", ...: gguf/quant_presets.h),
// quantized from F32 as kvserve-quantize does; spec.dtype is ignored. Throws
// std::invalid_argument for an unknown preset.
void write_synthetic_model(const SyntheticSpec& spec, const std::string& path, const std::string& preset);

}  // namespace kvserve
