#include "model/synthetic.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <stdexcept>

#include "gguf/gguf_writer.h"
#include "model/splitmix.h"
#include "model/synthetic_copier.h"
#include "gguf/quant_presets.h"
#include "codecs/convert.h"

namespace kvserve {
namespace {

// Encoded through the type table, so every type the writer can produce is available here.
// `design` (may be empty) then sets the entries a copier's circuit needs.
void fill(uint8_t* out, uint64_t n, TensorType type, uint64_t seed, float scale, bool ones,
          const std::function<void(std::vector<float>&)>& design) {
  SplitMix64 rng{seed};
  std::vector<float> values(n);
  for (float& x : values) x = ones ? 1.0f : rng.uniform() * scale;
  if (design) design(values);
  const TensorTypeTraits& t = tensor_type(type);
  if (!t.from_float) throw GgufError(std::string("synthetic model: cannot write ") + t.name + " weights");
  t.from_float(values.data(), out, static_cast<int64_t>(n));
}

// Filler pieces: "▁" alone (so a space never needs byte fallback), then "▁" followed by i - 1
// written in base 26 with letters: "▁a", "▁b", ..., "▁ba", ...
std::string filler_piece(int32_t i) {
  if (i == 0) return "\xE2\x96\x81";
  --i;
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('a' + i % 26));
    i /= 26;
  } while (i > 0);
  return "\xE2\x96\x81" + s;
}

}  // namespace

void validate(const SyntheticSpec& s) {
  auto need = [](bool ok, const char* what) {
    if (!ok) throw std::invalid_argument(what);
  };
  need(s.dim > 0 && s.layers > 0 && s.heads > 0 && s.kv_heads > 0 && s.ffn > 0 && s.context > 0,
       "dim, layers, heads, kv-heads, ffn and context must be positive");
  need(s.arch == "llama" || s.arch == "qwen3" || s.arch == "qwen3moe" || s.arch == "deepseek2" || s.arch == "gemma3",
       "arch must be llama, qwen3, qwen3moe, deepseek2 or gemma3");
  need(s.arch != "deepseek2" || (s.kv_lora > 0 && s.qk_rope > 0 && s.qk_rope % 2 == 0 && s.qk_nope > 0 &&
                                 s.v_head > 0 && s.shared_experts >= 0 && s.dense_layers >= 0 &&
                                 s.dense_layers <= s.layers),
       "kv-lora, qk-nope, v-head and an even qk-rope must be positive, dense-layers at most layers");
  need((s.arch != "qwen3moe" && s.arch != "deepseek2") || (s.experts > 0 && s.experts_used > 0 && s.experts_used <= s.experts && s.expert_ffn > 0),
       "experts, experts-used (at most experts) and expert-ffn must be positive");
  need(s.head_dim > 0 || s.dim % s.heads == 0, "dim must be a multiple of heads (or head-dim given)");
  need(s.head_dim >= 0, "head-dim must not be negative");
  need(s.arch != "llama" || s.head_dim == 0 || s.head_dim * s.heads == s.dim, "head-dim of llama is dim / heads");
  need(s.heads % s.kv_heads == 0, "kv-heads must divide heads");
  need((s.head_dim ? s.head_dim : s.dim / s.heads) % 2 == 0, "head dimension must be even for rotary embedding");
  need(s.arch != "gemma3" || (s.window > 0 && s.window_period > 0), "window and window-period must be positive");
  need(s.vocab >= 259, "vocab must be at least 259 (3 special tokens and 256 byte tokens)");
  if (s.copier) validate_copier(s);
}

namespace {

// The parts every synthetic model shares: its writer, the byte-level vocabulary, and tensors of
// deterministic uniform weights (norms all ones).
class Synth {
 public:
  explicit Synth(const SyntheticSpec& s) : s_(s), tensor_seed_(s.seed * 1000003ull) {}
  GgufWriter& w() { return w_; }
  std::string key(const std::string& k) const { return s_.arch + "." + k; }

  // general.*, the shape keys all share, and the vocabulary.
  void header(const std::string& name) {
    w_.add("general.architecture", GgufValue::str(s_.arch));
    w_.add("general.name", GgufValue::str(name));
    w_.add("general.file_type", GgufValue::u32(s_.dtype == TensorType::kF32 ? 0 : s_.dtype == TensorType::kF16 ? 1 : 32));
    w_.add(key("context_length"), GgufValue::u32(s_.context));
    w_.add(key("embedding_length"), GgufValue::u32(s_.dim));
    w_.add(key("block_count"), GgufValue::u32(s_.layers));
    w_.add(key("feed_forward_length"), GgufValue::u32(s_.ffn));
    w_.add(key("attention.head_count"), GgufValue::u32(s_.heads));
    w_.add(key("attention.layer_norm_rms_epsilon"), GgufValue::f32(1e-6f));
    w_.add(key("vocab_size"), GgufValue::u32(s_.vocab));
    if (!s_.vocab_from.empty()) {
      copy_vocabulary();
      return;
    }
    GgufArray tokens, scores, types;
    auto add_token = [&](std::string text, float score, int32_t type) {
      tokens.push_back(GgufValue::str(std::move(text)));
      scores.push_back(GgufValue::f32(score));
      types.push_back(GgufValue::i32(type));
    };
    add_token("<unk>", 0.0f, 2);
    add_token("<s>", 0.0f, 3);
    add_token("</s>", 0.0f, 3);
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
      add_token(hex, 0.0f, 6);
    }
    for (int32_t i = 0; static_cast<int32_t>(tokens.size()) < s_.vocab; ++i)
      add_token(filler_piece(i), -static_cast<float>(i), 1);
    w_.add("tokenizer.ggml.model", GgufValue::str("llama"));
    w_.add("tokenizer.ggml.tokens", GgufValue::array(GgufType::kString, std::move(tokens)));
    w_.add("tokenizer.ggml.scores", GgufValue::array(GgufType::kFloat32, std::move(scores)));
    w_.add("tokenizer.ggml.token_type", GgufValue::array(GgufType::kInt32, std::move(types)));
    w_.add("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
    w_.add("tokenizer.ggml.eos_token_id", GgufValue::u32(2));
    w_.add("tokenizer.ggml.unknown_token_id", GgufValue::u32(0));
    w_.add("tokenizer.ggml.add_bos_token", GgufValue::boolean(true));
  }
  void copy_vocabulary() {
    GgufFile src(s_.vocab_from);
    GgufArray tokens = src.get("tokenizer.ggml.tokens").as_array("tokenizer.ggml.tokens");
    const size_t own = tokens.size();
    if (static_cast<size_t>(s_.vocab) < own)
      throw std::invalid_argument("vocab must be at least the " + std::to_string(own) + " tokens of " + s_.vocab_from);
    const GgufValue* types_v = src.find("tokenizer.ggml.token_type");
    const GgufValue* scores_v = src.find("tokenizer.ggml.scores");
    GgufArray types = types_v ? types_v->as_array("tokenizer.ggml.token_type") : GgufArray{};
    GgufArray scores = scores_v ? scores_v->as_array("tokenizer.ggml.scores") : GgufArray{};
    std::vector<size_t> normal;
    std::set<std::string> seen;
    for (size_t i = 0; i < own; ++i) {
      const std::string& t = tokens[i].as_string("tokenizer.ggml.tokens");
      seen.insert(t);
      if (types.empty() || types[i].as_int("tokenizer.ggml.token_type") == 1) normal.push_back(i);
    }
    std::mt19937_64 rng(s_.seed * 7919 + 17);
    while (tokens.size() < static_cast<size_t>(s_.vocab)) {
      const std::string t = tokens[normal[rng() % normal.size()]].as_string("") + tokens[normal[rng() % normal.size()]].as_string("");
      if (!seen.insert(t).second) continue;
      tokens.push_back(GgufValue::str(t));
      if (!types.empty()) types.push_back(GgufValue::i32(1));
      if (!scores.empty()) scores.push_back(GgufValue::f32(-1e6f));
    }
    for (const auto& [k, v] : src.metadata()) {
      if (k.rfind("tokenizer.", 0) != 0) continue;
      if (k == "tokenizer.ggml.tokens") {
        w_.add(k, GgufValue::array(GgufType::kString, tokens));
      } else if (k == "tokenizer.ggml.token_type") {
        w_.add(k, GgufValue::array(GgufType::kInt32, types));
      } else if (k == "tokenizer.ggml.scores") {
        w_.add(k, GgufValue::array(GgufType::kFloat32, scores));
      } else {
        w_.add(k, v);
      }
    }
  }
  void add(const std::string& tname, std::vector<uint64_t> dims, bool norm) {
    uint64_t n = 1;
    for (uint64_t x : dims) n *= x;
    const TensorType type = norm ? TensorType::kF32 : s_.dtype;
    // Uniform weights scaled by 1/sqrt(fan_in) keep activations of every layer near unit size;
    // a copier's are small noise around its circuit.
    float scale = norm ? 0.0f : (tname == "token_embd.weight" ? 1.0f : 1.0f / std::sqrt(float(dims[0])));
    std::function<void(std::vector<float>&)> design;
    if (s_.copier && !norm) {
      scale = kCopierNoise / std::sqrt(float(dims[0]));
      design = [spec = s_, tname, dims](std::vector<float>& v) { copier_weights(spec, tname, dims, v); };
    }
    const uint64_t seed = ++tensor_seed_;
    w_.add_tensor(tname, std::move(dims), type,
                  [n, type, seed, scale, norm, design](uint8_t* out) { fill(out, n, type, seed, scale, norm, design); });
  }
  // A SwiGLU FFN of width ff under names ffn_{gate,up,down}<suffix>.
  void swiglu(const std::string& p, uint64_t ff, const std::string& suffix = "") {
    const uint64_t d = s_.dim;
    add(p + "ffn_gate" + suffix + ".weight", {d, ff}, false);
    add(p + "ffn_up" + suffix + ".weight", {d, ff}, false);
    add(p + "ffn_down" + suffix + ".weight", {ff, d}, false);
  }
  // The router and the stacked experts ([in, out, expert]).
  void experts(const std::string& p) {
    const uint64_t d = s_.dim, e = s_.experts, fe = s_.expert_ffn;
    add(p + "ffn_gate_inp.weight", {d, e}, false);
    add(p + "ffn_gate_exps.weight", {d, fe, e}, false);
    add(p + "ffn_up_exps.weight", {d, fe, e}, false);
    add(p + "ffn_down_exps.weight", {fe, d, e}, false);
  }
  void experts_keys() {
    w_.add(key("expert_count"), GgufValue::u32(s_.experts));
    w_.add(key("expert_used_count"), GgufValue::u32(s_.experts_used));
    w_.add(key("expert_feed_forward_length"), GgufValue::u32(s_.expert_ffn));
  }
  void output() {
    add("output_norm.weight", {uint64_t(s_.dim)}, true);
    if (!s_.tied_output) add("output.weight", {uint64_t(s_.dim), uint64_t(s_.vocab)}, false);
  }

 private:
  const SyntheticSpec& s_;
  GgufWriter w_;
  uint64_t tensor_seed_;
};

// DeepSeek-V2's layout: latent attention without a query bottleneck, dense_layers dense layers,
// then mixtures with shared experts (softmax gating, weights not renormalised).
void write_latent_model(const SyntheticSpec& s, const std::string& path) {
  Synth m(s);
  char name[160];
  std::snprintf(name, sizeof(name), "kvserve-synthetic-deepseek2-d%d-l%d-h%d-c%d", s.dim, s.layers, s.heads, s.kv_lora);
  m.header(name);
  GgufWriter& w = m.w();
  w.add(m.key("attention.head_count_kv"), GgufValue::u32(1));
  w.add(m.key("attention.key_length"), GgufValue::u32(s.kv_lora + s.qk_rope));
  w.add(m.key("attention.value_length"), GgufValue::u32(s.kv_lora));
  w.add(m.key("attention.key_length_mla"), GgufValue::u32(s.qk_nope + s.qk_rope));
  w.add(m.key("attention.value_length_mla"), GgufValue::u32(s.v_head));
  w.add(m.key("attention.kv_lora_rank"), GgufValue::u32(s.kv_lora));
  w.add(m.key("rope.dimension_count"), GgufValue::u32(s.qk_rope));
  w.add(m.key("rope.freq_base"), GgufValue::f32(10000.0f));
  w.add(m.key("leading_dense_block_count"), GgufValue::u32(s.dense_layers));
  m.experts_keys();
  w.add(m.key("expert_shared_count"), GgufValue::u32(s.shared_experts));
  w.add(m.key("expert_weights_scale"), GgufValue::f32(1.0f));
  w.add(m.key("expert_weights_norm"), GgufValue::boolean(false));
  w.add(m.key("expert_gating_func"), GgufValue::u32(1));
  const uint64_t d = s.dim, h = s.heads, lora = s.kv_lora, rope = s.qk_rope, nope = s.qk_nope, vd = s.v_head;
  m.add("token_embd.weight", {d, uint64_t(s.vocab)}, false);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    m.add(p + "attn_norm.weight", {d}, true);
    m.add(p + "attn_q.weight", {d, h * (nope + rope)}, false);
    m.add(p + "attn_kv_a_mqa.weight", {d, lora + rope}, false);
    m.add(p + "attn_kv_a_norm.weight", {lora}, true);
    m.add(p + "attn_k_b.weight", {nope, lora, h}, false);
    m.add(p + "attn_v_b.weight", {lora, vd, h}, false);
    m.add(p + "attn_output.weight", {h * vd, d}, false);
    m.add(p + "ffn_norm.weight", {d}, true);
    if (l < s.dense_layers) {
      m.swiglu(p, s.ffn);
    } else {
      m.experts(p);
      if (s.shared_experts > 0) m.swiglu(p, uint64_t(s.shared_experts) * s.expert_ffn, "_shexp");
    }
  }
  m.output();
  w.write(path);
}

}  // namespace

void write_synthetic_model(const SyntheticSpec& s, const std::string& path) {
  validate(s);
  if (s.arch == "deepseek2") return write_latent_model(s, path);
  const int32_t head_dim = s.head_dim ? s.head_dim : s.dim / s.heads;
  const bool gemma = s.arch == "gemma3", head_norms = s.arch != "llama", moe = s.arch == "qwen3moe";
  char name[160];
  std::snprintf(name, sizeof(name), "kvserve-synthetic-%s%s-d%d-l%d-h%d-kv%d", s.arch.c_str(), s.copier ? "-copier" : "",
                s.dim, s.layers, s.heads, s.kv_heads);
  Synth m(s);
  m.header(name);
  GgufWriter& w = m.w();
  w.add(m.key("attention.head_count_kv"), GgufValue::u32(s.kv_heads));
  if (head_norms) {
    w.add(m.key("attention.key_length"), GgufValue::u32(head_dim));
    w.add(m.key("attention.value_length"), GgufValue::u32(head_dim));
  } else {
    w.add(m.key("rope.dimension_count"), GgufValue::u32(head_dim));
  }
  w.add(m.key("rope.freq_base"), GgufValue::f32(s.copier ? kCopierRopeBase : head_norms ? 1e6f : 10000.0f));
  if (gemma) {
    w.add(m.key("rope.freq_base_swa"), GgufValue::f32(10000.0f));
    w.add(m.key("attention.sliding_window"), GgufValue::u32(s.window));
    w.add(m.key("attention.sliding_window_pattern"), GgufValue::u32(s.window_period));
  }
  if (moe) m.experts_keys();
  const uint64_t d = s.dim, hd = head_dim, qd = uint64_t(s.heads) * head_dim, kvd = uint64_t(s.kv_heads) * head_dim;
  m.add("token_embd.weight", {d, uint64_t(s.vocab)}, false);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    m.add(p + "attn_norm.weight", {d}, true);
    m.add(p + "attn_q.weight", {d, qd}, false);
    m.add(p + "attn_k.weight", {d, kvd}, false);
    m.add(p + "attn_v.weight", {d, kvd}, false);
    if (head_norms) {
      m.add(p + "attn_q_norm.weight", {hd}, true);
      m.add(p + "attn_k_norm.weight", {hd}, true);
    }
    m.add(p + "attn_output.weight", {qd, d}, false);
    if (gemma) m.add(p + "post_attention_norm.weight", {d}, true);
    m.add(p + "ffn_norm.weight", {d}, true);
    if (moe)
      m.experts(p);
    else
      m.swiglu(p, s.ffn);
    if (gemma) m.add(p + "post_ffw_norm.weight", {d}, true);
  }
  m.output();
  w.write(path);
}

void write_synthetic_model(const SyntheticSpec& spec, const std::string& path, const std::string& preset_name) {
  const QuantPreset* preset = find_quant_preset(preset_name);
  if (!preset) throw std::invalid_argument("unknown weight type '" + preset_name + "' (one of " + quant_preset_names() + ")");
  SyntheticSpec s = spec;
  const TensorType base = preset->base;
  if (base == TensorType::kF32 || base == TensorType::kF16 || base == TensorType::kBF16) {
    s.dtype = base;
    write_synthetic_model(s, path);
    return;
  }
  s.dtype = TensorType::kF32;
  const std::string tmp = path + ".f32.tmp";
  write_synthetic_model(s, tmp);
  {
    GgufFile f32(tmp);
    quantize_file(f32, path, *preset);
  }
  std::filesystem::remove(tmp);
}

}  // namespace kvserve
