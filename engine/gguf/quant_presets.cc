#include "gguf/quant_presets.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <iterator>

#include "gguf/gguf_writer.h"

namespace kvserve {
namespace {

using T = TensorType;

constexpr QuantPreset kPresets[] = {
    {"F32", 0, T::kF32},     {"F16", 1, T::kF16},       {"BF16", 32, T::kBF16},    {"Q4_0", 2, T::kQ4_0},
    {"Q4_1", 3, T::kQ4_1},   {"Q5_0", 8, T::kQ5_0},     {"Q5_1", 9, T::kQ5_1},     {"Q8_0", 7, T::kQ8_0},
    {"Q2_K", 10, T::kQ2_K},  {"Q3_K_S", 11, T::kQ3_K},  {"Q3_K_M", 12, T::kQ3_K},  {"Q3_K_L", 13, T::kQ3_K},
    {"Q4_K_S", 14, T::kQ4_K}, {"Q4_K_M", 15, T::kQ4_K}, {"Q5_K_S", 16, T::kQ5_K}, {"Q5_K_M", 17, T::kQ5_K},
    {"Q6_K", 18, T::kQ6_K},  {"MXFP4_MOE", 38, T::kMXFP4},
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// llama.cpp's choice of layers that get more bits: the first and last eighth, and every third
// one between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool is(const QuantPreset& p, const char* name) { return std::string(p.name) == name; }

// What a type falls back to when a row's length is not a multiple of its block.
T fallback(T t) {
  switch (t) {
    case T::kQ2_K: case T::kQ3_K: return T::kIQ4_NL;
    case T::kQ4_K: return T::kQ5_0;
    case T::kQ5_K: return T::kQ5_1;
    case T::kQ6_K: return T::kQ8_0;
    default: return t;
  }
}

int64_t count_suffix(const GgufFile& f, const std::string& suffix) {
  return std::count_if(f.tensors().begin(), f.tensors().end(),
                       [&](const GgufTensorInfo& t) { return ends_with(t.name, suffix); });
}

}  // namespace

const QuantPreset* find_quant_preset(const std::string& name) {
  std::string upper;
  std::transform(name.begin(), name.end(), std::back_inserter(upper), [](unsigned char c) { return std::toupper(c); });
  for (const QuantPreset& p : kPresets)
    if (upper == p.name) return &p;
  return nullptr;
}

std::string quant_preset_names() {
  std::string s;
  for (const QuantPreset& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

std::vector<TensorType> plan_tensor_types(const GgufFile& f, const QuantPreset& p) {
  const bool has_output = f.find_tensor("output.weight") != nullptr;
  int64_t n_gqa = 1, n_expert = 0, n_layer = 0;
  if (const GgufValue* arch = f.find("general.architecture")) {
    const std::string a = arch->as_string("general.architecture");
    const GgufValue* h = f.find(a + ".attention.head_count");
    const GgufValue* hkv = f.find(a + ".attention.head_count_kv");
    if (h && hkv && hkv->as_int("head_count_kv") > 0) n_gqa = h->as_int("head_count") / hkv->as_int("head_count_kv");
    if (const GgufValue* e = f.find(a + ".expert_count")) n_expert = e->as_int("expert_count");
    if (const GgufValue* b = f.find(a + ".block_count")) n_layer = b->as_int("block_count");
  }
  const int n_attn_v = static_cast<int>(count_suffix(f, "attn_v.weight"));
  // A mixture's FFN-down tensors (routed and shared experts) are placed by their layer, read
  // from the name, among the block count, as llama-quantize places them.
  const int n_ffn_down = static_cast<int>(n_expert > 1 ? n_layer : count_suffix(f, "ffn_down.weight"));
  int i_attn_v = 0, i_ffn_down = 0;
  const bool eight_experts = n_expert == 8;  // llama-quantize's extra bits for 8-expert models
  std::vector<TensorType> out;
  for (const GgufTensorInfo& t : f.tensors()) {
    // Matrices and stacked experts; never the router (ffn_gate_inp), as llama-quantize keeps it.
    const bool weight = ends_with(t.name, "weight") && (t.dims.size() == 2 || t.dims.size() == 3) &&
                        t.name != "position_embd.weight" && t.name.find("ffn_gate_inp.weight") == std::string::npos;
    // Block types are not requantized (llama-quantize's default), but the F32 preset decodes
    // them: it writes a file's exactly dequantized twin.
    if (weight && p.base == T::kF32 && tensor_type(t.type).to_float) {
      out.push_back(T::kF32);
      continue;
    }
    const bool quantize = weight && (t.type == T::kF32 || t.type == T::kF16 || t.type == T::kBF16);
    if (!quantize) {
      out.push_back(t.type);
      continue;
    }
    T type = p.base;
    if (is(p, "MXFP4_MOE")) {
      // llama-quantize's MXFP4_MOE: stacked experts (a third dimension above 1) MXFP4, every
      // other matrix Q8_0, with none of the other presets' per-tensor rules.
      const bool experts = t.dims.size() == 3 && t.dims[2] > 1;
      type = experts && t.name != "output.weight" ? T::kMXFP4 : T::kQ8_0;
      if (static_cast<int64_t>(t.dims[0]) % tensor_type(type).block_size != 0) type = T::kF16;
      out.push_back(type);
      continue;
    }
    const bool block_base = p.base != T::kF32 && p.base != T::kF16 && p.base != T::kBF16;
    const int64_t nx = static_cast<int64_t>(t.dims[0]);
    if (t.name == "output.weight" || (!has_output && t.name == "token_embd.weight")) {
      if (p.base != T::kF32 && p.base != T::kF16 && p.base != T::kBF16)
        type = nx % 256 != 0 ? T::kQ8_0 : (p.base == T::kQ8_0 ? T::kQ8_0 : T::kQ6_K);
    } else if (ends_with(t.name, "attn_v.weight")) {
      if (is(p, "Q2_K")) type = n_gqa >= 4 ? T::kQ4_K : T::kQ3_K;
      else if (is(p, "Q3_K_M")) type = i_attn_v < 2 ? T::kQ5_K : T::kQ4_K;
      else if (is(p, "Q3_K_L")) type = T::kQ5_K;
      else if ((is(p, "Q4_K_M") || is(p, "Q5_K_M")) && use_more_bits(i_attn_v, n_attn_v)) type = T::kQ6_K;
      else if (is(p, "Q4_K_S") && i_attn_v < 4) type = T::kQ5_K;
      if (eight_experts && block_base) type = T::kQ8_0;
      ++i_attn_v;
    } else if (ends_with(t.name, "attn_k.weight")) {
      if (eight_experts && block_base) type = T::kQ8_0;
    } else if (t.name.find("ffn_down") != std::string::npos) {
      int i = i_ffn_down;
      const int n = n_ffn_down;
      if (n_expert > 1 && std::sscanf(t.name.c_str(), "blk.%d.", &i) != 1)
        throw GgufError(f.path() + ": cannot read the layer of tensor '" + t.name + "'");
      if (is(p, "Q2_K")) type = T::kQ3_K;
      else if (is(p, "Q3_K_M")) type = i < n / 16 ? T::kQ5_K : T::kQ4_K;
      else if (is(p, "Q3_K_L")) type = T::kQ5_K;
      else if ((is(p, "Q4_K_M") || is(p, "Q5_K_M")) && use_more_bits(i, n)) type = T::kQ6_K;
      else if (is(p, "Q4_K_S") && i < n / 8) type = T::kQ5_K;
      ++i_ffn_down;
    } else if (ends_with(t.name, "attn_output.weight")) {
      if (eight_experts) {
        if (is(p, "Q2_K") || is(p, "Q3_K_S") || is(p, "Q3_K_M") || is(p, "Q4_K_S") || is(p, "Q4_K_M")) type = T::kQ5_K;
      } else if (is(p, "Q2_K")) type = T::kQ3_K;
      else if (is(p, "Q3_K_M")) type = T::kQ4_K;
      else if (is(p, "Q3_K_L")) type = T::kQ5_K;
    } else if (ends_with(t.name, "attn_qkv.weight")) {
      if (is(p, "Q3_K_M") || is(p, "Q3_K_L")) type = T::kQ4_K;
      else if (is(p, "Q4_K_M")) type = T::kQ5_K;
      else if (is(p, "Q5_K_M")) type = T::kQ6_K;
    }
    if (nx % tensor_type(type).block_size != 0) type = fallback(type);
    if (nx % tensor_type(type).block_size != 0) type = T::kF16;
    out.push_back(type);
  }
  return out;
}

void quantize_file(const GgufFile& f, const std::string& out_path, const QuantPreset& p) {
  const std::vector<TensorType> plan = plan_tensor_types(f, p);
  GgufWriter w(f.alignment());
  for (const auto& [key, value] : f.metadata())
    if (key != "general.file_type" && key != "general.alignment") w.add(key, value);
  w.add("general.file_type", GgufValue::u32(p.file_type));
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const GgufTensorInfo& t = f.tensors()[i];
    const TensorType to = plan[i];
    if (!tensor_type(to).from_float && to != t.type)
      throw GgufError(std::string("cannot write tensors of type ") + tensor_type_name(to));
    w.add_tensor(t.name, t.dims, to, [&f, &t, to](uint8_t* dst) {
      if (to == t.type) {
        std::copy_n(static_cast<const uint8_t*>(f.tensor_data(t)), t.n_bytes(), dst);
        return;
      }
      const TensorTypeTraits& from = tensor_type(t.type);
      if (!from.to_float) throw GgufError(f.path() + ": tensor '" + t.name + "' cannot be decoded");
      std::vector<float> values(t.n_elements());
      from.to_float(f.tensor_data(t), values.data(), static_cast<int64_t>(values.size()));
      tensor_type(to).from_float(values.data(), dst, static_cast<int64_t>(values.size()));
    });
  }
  w.write(out_path);
}

}  // namespace kvserve
