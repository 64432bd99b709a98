// The presets llama-quantize writes (Q4_K_M, Q8_0, ...) and its per-tensor rules: which type each
// tensor of a model gets under a preset (the output matrix Q6_K, more bits for attn_v and
// ffn_down on chosen layers, fallbacks for rows that do not fill a block), and the file
// conversion kvserve-quantize and kvserve-mkmodel run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf.h"

namespace kvserve {

struct QuantPreset {
  const char* name;     // "Q4_K_M"
  uint32_t file_type;   // general.file_type (llama.cpp's llama_ftype)
  TensorType base;      // the type of most 2-D weights
};

// The preset of that name (case-insensitive), or null.
const QuantPreset* find_quant_preset(const std::string& name);
// "F32, F16, BF16, Q4_0, ..., Q6_K".
std::string quant_preset_names();

// The type of every tensor of `file` (in file.tensors() order) under the preset. Tensors already
// in a block type keep it, except under F32, which decodes them (a dequantized twin).
std::vector<TensorType> plan_tensor_types(const GgufFile& file, const QuantPreset& preset);

// Writes `file` with its tensors converted as plan_tensor_types says (unchanged tensors copied
// byte for byte), metadata copied and general.file_type set. Throws GgufError.
void quantize_file(const GgufFile& file, const std::string& out_path, const QuantPreset& preset);

}  // namespace kvserve
