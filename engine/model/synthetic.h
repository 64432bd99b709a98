// Synthetic Llama-architecture GGUF models: any shape, deterministic random weights, and a
// byte-level SentencePiece-style vocab (byte tokens plus filler pieces). How a machine without
// downloads gets a model, and how benchmarks get models of realistic size.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf.h"

namespace kvserve {

struct SyntheticSpec {
  int32_t dim = 64;         // embedding width
  int32_t layers = 2;
  int32_t heads = 4;
  int32_t kv_heads = 4;     // must divide heads
  int32_t ffn = 172;        // SwiGLU hidden width
  int32_t vocab = 512;      // at least 259 (3 specials + 256 bytes)
  int32_t context = 2048;   // llama.context_length
  TensorType dtype = TensorType::kF32;  // of the 2-D weights; norms stay F32
  uint64_t seed = 1;
  bool tied_output = false; // leave out output.weight (the embedding is the classifier)
};

// Throws std::invalid_argument naming the field when the shape is impossible.
void validate(const SyntheticSpec& spec);
void write_synthetic_llama(const SyntheticSpec& spec, const std::string& path);
// The same model in a llama-quantize preset ("Q4_K_M", "F16", ...: gguf/quant_presets.h),
// quantized from F32 as kvserve-quantize does; spec.dtype is ignored. Throws
// std::invalid_argument for an unknown preset.
void write_synthetic_llama(const SyntheticSpec& spec, const std::string& path, const std::string& preset);

}  // namespace kvserve
