#include "model/decoder_hparams.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace kvserve {
namespace {

// Reads the keys under one architecture's prefix and remembers which were read, so that the
// ones nobody read can be refused by name.
class ArchKeys {
 public:
  ArchKeys(const GgufFile& f, const ArchSpec& spec) : f_(f), spec_(spec) {}

  std::string name(const std::string& suffix) const { return spec_.key(suffix); }
  const GgufValue* find(const std::string& suffix) {
    read_.insert(name(suffix));
    return f_.find(name(suffix));
  }
  int32_t get_int(const std::string& suffix, int64_t fallback, bool required) {
    const GgufValue* v = find(suffix);
    if (!v) {
      if (required) fail("missing metadata key '" + name(suffix) + "'");
      return static_cast<int32_t>(fallback);
    }
    const int64_t x = v->as_int(name(suffix));
    if (x <= 0 || x > (int64_t{1} << 30))
      fail("key '" + name(suffix) + "' has out-of-range value " + std::to_string(x));
    return static_cast<int32_t>(x);
  }
  float get_float(const std::string& suffix, float fallback) {
    const GgufValue* v = find(suffix);
    if (!v) return fallback;
    const double x = v->as_float(name(suffix));
    if (!(x > 0.0) || !std::isfinite(x)) fail("key '" + name(suffix) + "' must be positive, not " + std::to_string(x));
    return static_cast<float>(x);
  }
  // Keys that carry no meaning for inference once the ones above are read.
  void ignore(const std::string& suffix) { read_.insert(name(suffix)); }

  // Every key under the prefix that was not read is one this build does not implement.
  void refuse_unread() const {
    const std::string prefix = spec_.name + ".";
    for (const auto& [key, value] : f_.metadata())
      if (key.compare(0, prefix.size(), prefix) == 0 && !read_.count(key))
        fail("key '" + key + "' is not implemented for architecture '" + spec_.name + "'");
  }
  [[noreturn]] void fail(const std::string& what) const { throw GgufError(f_.path() + ": " + what); }

 private:
  const GgufFile& f_;
  const ArchSpec& spec_;
  std::set<std::string> read_;
};

std::string dims_str(const std::vector<uint64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// Linear and YaRN rotary scaling (Llama 3's comes as rope_freqs.weight); the others are refused
// by name.
void read_rope_scaling(ArchKeys& keys, DecoderHparams& hp) {
  std::string type = "none";
  if (const GgufValue* t = keys.find("rope.scaling.type")) type = t->as_string(keys.name("rope.scaling.type"));
  float factor = keys.get_float("rope.scaling.factor", 1.0f);
  if (const GgufValue* old = keys.find("rope.scale_linear")) {  // the key before rope.scaling.*
    type = "linear";
    factor = static_cast<float>(old->as_float(keys.name("rope.scale_linear")));
  }
  if (type != "none" && type != "linear" && type != "yarn")
    keys.fail("key '" + keys.name("rope.scaling.type") + "' is '" + type +
              "': only 'none', 'linear' and 'yarn' are implemented (Llama 3's scaling comes as rope_freqs.weight)");
  if (type != "none") {
    if (!(factor > 0.0f)) keys.fail("rope scaling factor must be positive");
    hp.rope_freq_scale = 1.0f / factor;
  }
  // The context the model was trained at before the scaling: YaRN's ramp depends on it.
  const int32_t n_ctx_orig = keys.get_int("rope.scaling.original_context_length", hp.n_ctx_train, false);
  keys.ignore("rope.scaling.finetuned");
  const float attn_factor = keys.get_float("rope.scaling.attn_factor", 1.0f);
  if (type == "yarn") {
    float log_mul = 0.0f;
    if (const GgufValue* v = keys.find("rope.scaling.yarn_log_multiplier")) {
      log_mul = static_cast<float>(v->as_float(keys.name("rope.scaling.yarn_log_multiplier")));
      if (!std::isfinite(log_mul) || log_mul < 0.0f)
        keys.fail("key '" + keys.name("rope.scaling.yarn_log_multiplier") + "' must be finite and not negative");
      if (hp.spec->yarn_mscale_fixed) log_mul /= 0.1f;  // DeepSeek-V2's converter writes 0.1 x mscale_all_dim
    }
    hp.yarn_log_mul = log_mul;
    hp.yarn = make_yarn(hp.rope_dim, n_ctx_orig, hp.rope_base, factor, keys.get_float("rope.scaling.yarn_beta_fast", 32.0f),
                        keys.get_float("rope.scaling.yarn_beta_slow", 1.0f),
                        keys.get_float("rope.scaling.yarn_ext_factor", 1.0f),
                        attn_factor * keys.get_float("rope.scaling.yarn_attn_factor", 1.0f), log_mul,
                        hp.spec->yarn_mscale_fixed);
  } else if (attn_factor != 1.0f) {
    hp.yarn.magnitude = attn_factor;  // ggml's rope scales cos and sin by it without YaRN too
  }
}

// A mixture of experts: how many, how many per token, their width, the weights' scale.
void read_moe(ArchKeys& keys, DecoderHparams& hp) {
  MoeRouting& r = hp.routing;
  r.n_expert = keys.get_int("expert_count", 0, true);
  r.n_used = keys.get_int("expert_used_count", 0, true);
  if (r.n_used > r.n_expert)
    keys.fail(keys.name("expert_used_count") + " " + std::to_string(r.n_used) + " exceeds " +
              keys.name("expert_count") + " " + std::to_string(r.n_expert));
  r.gating = hp.spec->moe_gating;
  r.normalize = hp.spec->moe_normalize;
  hp.n_ff_expert = keys.get_int("expert_feed_forward_length", hp.n_ff / r.n_used, false);
  // llama.cpp reads a scale of 0 as none.
  if (const GgufValue* v = keys.find("expert_weights_scale")) {
    const double scale = v->as_float(keys.name("expert_weights_scale"));
    if (!std::isfinite(scale) || scale < 0.0)
      keys.fail("key '" + keys.name("expert_weights_scale") + "' must be finite and not negative");
    if (scale != 0.0) r.scale = static_cast<float>(scale);
  }
  if (!hp.spec->moe_keys) {
    // The architecture fixes renormalisation (as llama.cpp's graph for it does).
    keys.ignore("expert_weights_norm");
    if (const GgufValue* v = keys.find("expert_shared_count"); v && v->as_int(keys.name("expert_shared_count")) != 0)
      keys.fail("key '" + keys.name("expert_shared_count") + "': shared experts are not implemented for architecture '" +
                hp.spec->name + "'");
    return;
  }
  // DeepSeek-V2: the file says (softmax and no renormalisation where it does not).
  if (const GgufValue* v = keys.find("expert_gating_func")) {
    const int64_t g = v->as_int(keys.name("expert_gating_func"));
    if (g != 1 && g != 2)
      keys.fail("key '" + keys.name("expert_gating_func") + "' is " + std::to_string(g) +
                ": only 1 (softmax) and 2 (sigmoid) are implemented");
    r.gating = g == 1 ? MoeGating::kSoftmax : MoeGating::kSigmoid;
  }
  if (const GgufValue* v = keys.find("expert_weights_norm")) r.normalize = v->as_bool(keys.name("expert_weights_norm"));
  if (const GgufValue* v = keys.find("expert_shared_count")) {
    const int64_t n = v->as_int(keys.name("expert_shared_count"));
    if (n < 0 || n > 64) keys.fail("key '" + keys.name("expert_shared_count") + "' is out of range");
    hp.n_ff_shared = static_cast<int32_t>(n) * hp.n_ff_expert;
  }
  if (const GgufValue* v = keys.find("leading_dense_block_count")) {
    const int64_t n = v->as_int(keys.name("leading_dense_block_count"));
    if (n < 0 || n > hp.n_layer)
      keys.fail("key '" + keys.name("leading_dense_block_count") + "' is " + std::to_string(n) + ", outside 0.." +
                std::to_string(hp.n_layer));
    hp.n_dense_lead = static_cast<int32_t>(n);
  }
}

// Multi-head latent attention: the latent and rotary widths, each head's query/key and value
// widths, the query bottleneck. The file's key_length / value_length are the cached row's
// (kv_lora_rank + rope, kv_lora_rank) and key_length_mla / value_length_mla a head's; files
// written before the split (attn_kv_b) carry only the head's, as key_length / value_length.
void read_latent(ArchKeys& keys, DecoderHparams& hp, int32_t key_length, int32_t value_length) {
  ModelHparams::Latent& m = hp.mla;
  m.kv_lora_rank = keys.get_int("attention.kv_lora_rank", 0, true);
  m.qk_rope_dim = keys.get_int("rope.dimension_count", 0, true);
  if (const GgufValue* q = keys.find("attention.q_lora_rank")) {
    const int64_t r = q->as_int(keys.name("attention.q_lora_rank"));
    if (r < 0 || r > (int64_t{1} << 20)) keys.fail("key '" + keys.name("attention.q_lora_rank") + "' is out of range");
    m.q_lora_rank = static_cast<int32_t>(r);
  }
  const int32_t k_mla = keys.get_int("attention.key_length_mla", 0, false);
  const int32_t v_mla = keys.get_int("attention.value_length_mla", 0, false);
  if ((k_mla > 0) != (v_mla > 0))
    keys.fail("keys '" + keys.name("attention.key_length_mla") + "' and '" + keys.name("attention.value_length_mla") +
              "' come together");
  if (k_mla > 0 && (key_length != m.kv_lora_rank + m.qk_rope_dim || value_length != m.kv_lora_rank))
    keys.fail(keys.name("attention.key_length") + " " + std::to_string(key_length) + " and " +
              keys.name("attention.value_length") + " " + std::to_string(value_length) +
              " must be kv_lora_rank + rope.dimension_count and kv_lora_rank");
  const int32_t head_k = k_mla > 0 ? k_mla : key_length;
  m.v_head_dim = k_mla > 0 ? v_mla : value_length;
  if (head_k <= m.qk_rope_dim || m.qk_rope_dim % 2 != 0)
    keys.fail(keys.name("rope.dimension_count") + " " + std::to_string(m.qk_rope_dim) +
              " must be even and below the head's key length " + std::to_string(head_k));
  m.qk_nope_dim = head_k - m.qk_rope_dim;
  hp.n_head_kv = 1;  // one latent and one rotary key, shared by every head
  hp.head_dim = m.kv_lora_rank + m.qk_rope_dim;
  hp.v_dim = m.v_head_dim;
  hp.q_dim = hp.n_head * head_k;
}

}  // namespace

DecoderHparams DecoderHparams::from_gguf(const GgufFile& f) {
  const std::string arch =
      f.has("general.architecture") ? f.get("general.architecture").as_string("general.architecture") : "(none)";
  const ArchSpec* spec = find_arch_spec(arch);
  if (!spec)
    throw GgufError(f.path() + ": unsupported architecture '" + arch + "' (supported: " + implemented_architectures() +
                    ")");
  ArchKeys keys(f, *spec);
  DecoderHparams hp;
  hp.spec = spec;
  hp.architecture = arch;
  if (const GgufValue* n = f.find("general.name")) hp.name = n->as_string("general.name");
  hp.n_embd = keys.get_int("embedding_length", 0, true);
  hp.n_layer = keys.get_int("block_count", 0, true);
  // Every layer has tensors of its own (blk.N.*): a count the file cannot back is refused before
  // anything is sized by it.
  if (static_cast<size_t>(hp.n_layer) > f.tensors().size() || !f.find_tensor_prefix("blk." + std::to_string(hp.n_layer - 1) + "."))
    keys.fail(keys.name("block_count") + " " + std::to_string(hp.n_layer) + " but the file has no tensors of layer " +
              std::to_string(hp.n_layer - 1));
  hp.n_head = keys.get_int("attention.head_count", 0, true);
  hp.n_head_kv = keys.get_int("attention.head_count_kv", hp.n_head, false);
  hp.n_ff = keys.get_int("feed_forward_length", 0, true);
  hp.n_ctx_train = keys.get_int("context_length", 2048, false);
  if (hp.n_head % hp.n_head_kv != 0)
    keys.fail(keys.name("attention.head_count_kv") + " " + std::to_string(hp.n_head_kv) + " does not divide " +
              keys.name("attention.head_count") + " " + std::to_string(hp.n_head));
  // The head size: key_length where the file gives it, else n_embd / n_head.
  const int32_t key_length = keys.get_int("attention.key_length", 0, false);
  if (key_length == 0 && hp.n_embd % hp.n_head != 0)
    keys.fail(keys.name("embedding_length") + " " + std::to_string(hp.n_embd) + " is not a multiple of " +
              keys.name("attention.head_count") + " " + std::to_string(hp.n_head) + " and there is no " +
              keys.name("attention.key_length"));
  hp.head_dim = key_length ? key_length : hp.n_embd / hp.n_head;
  const int32_t value_length = keys.get_int("attention.value_length", hp.head_dim, false);
  if (spec->attn == AttnKind::kLatent) {
    read_latent(keys, hp, hp.head_dim, value_length);
  } else {
    if (value_length != hp.head_dim)
      keys.fail(keys.name("attention.value_length") + " " + std::to_string(value_length) +
                " differs from the key length " + std::to_string(hp.head_dim) + ": not implemented");
    hp.q_dim = hp.n_head * hp.head_dim;
    hp.v_dim = hp.head_dim;
  }

  if (spec->rope != RopeLayout::kNone) {
    hp.rope_dim = keys.get_int("rope.dimension_count", hp.head_dim, false);
    if (hp.rope_dim > hp.head_dim || hp.rope_dim % 2 != 0)
      keys.fail(keys.name("rope.dimension_count") + " " + std::to_string(hp.rope_dim) +
                " must be even and at most the head dimension " + std::to_string(hp.head_dim));
    hp.rope_base = keys.get_float("rope.freq_base", 10000.0f);
    read_rope_scaling(keys, hp);
  }
  hp.norm_eps = keys.get_float(spec->norm == NormKind::kRms ? "attention.layer_norm_rms_epsilon"
                                                            : "attention.layer_norm_epsilon",
                               1e-5f);
  if (spec->attn_logit_softcap) hp.attn_soft_cap = keys.get_float("attn_logit_softcapping", 0.0f);
  if (spec->final_logit_softcap) hp.final_soft_cap = keys.get_float("final_logit_softcapping", 0.0f);
  if (spec->window_period > 0) hp.sliding_window = keys.get_int("attention.sliding_window", 0, false);
  int32_t period = spec->window_period;
  if (spec->window_period_key && hp.sliding_window > 0) {
    if (const GgufValue* v = keys.find("attention.sliding_window_pattern")) {
      if (v->type != GgufType::kArray) {
        period = keys.get_int("attention.sliding_window_pattern", period, true);
      } else {
        keys.fail("key '" + keys.name("attention.sliding_window_pattern") +
                  "' as a per-layer array is not implemented (a period is)");
      }
    }
  }
  hp.ropes.push_back({hp.rope_base, hp.rope_freq_scale, hp.yarn});
  if (spec->local_rope_base && hp.sliding_window > 0)
    hp.ropes.push_back({keys.get_float("rope.freq_base_swa", 10000.0f), 1.0f, Yarn{}});
  else if (spec->local_rope_base)
    keys.ignore("rope.freq_base_swa");  // no layer is windowed: every layer uses rope.freq_base
  hp.layer_attn.resize(hp.n_layer);
  for (int l = 0; l < hp.n_layer; ++l) {
    const bool local = hp.sliding_window > 0 && period > 0 && (period == 1 || l % period < period - 1);
    hp.layer_attn[l] = {.window = local ? hp.sliding_window : 0, .rope = local && hp.ropes.size() > 1 ? 1 : 0};
    hp.layer_windows.push_back(hp.layer_attn[l].window);
  }
  const int32_t head_scale = spec->attn == AttnKind::kLatent ? hp.mla.qk_nope_dim + hp.mla.qk_rope_dim
                             : spec->embd_query_scale_layers == hp.n_layer ? hp.n_embd / hp.n_head
                                                                           : hp.head_dim;
  hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(head_scale));
  if (spec->yarn_mscale_fixed && spec->rope != RopeLayout::kNone) {
    // DeepSeek-V2 moves YaRN's magnitude into the query scale: mscale² with mscale = the
    // attention factor before ggml's own 1 + 0.1·ln(factor) is taken off, times
    // 1 + 0.1·log_mul·ln(factor) (llama.cpp's deepseek2 graph).
    const float factor = 1.0f / hp.rope_freq_scale, ln = std::log(factor);
    const float attn_org = hp.yarn.ext_factor != 0.0f ? hp.yarn.magnitude : hp.yarn.magnitude * (1.0f + 0.1f * ln);
    const float mscale = attn_org * (1.0f + 0.1f * hp.yarn_log_mul * ln);
    hp.attn_scale *= mscale * mscale;
  }
  if (spec->scale_embedding) hp.embed_scale = std::sqrt(static_cast<float>(hp.n_embd));

  // Keys that hold for every decoder here or say nothing new.
  keys.ignore("vocab_size");          // the embedding's rows say it
  keys.ignore("tensor_data_layout");  // how an old converter ordered Q/K rows; the tensors are final
  if (spec->moe) {
    read_moe(keys, hp);
  } else {
    for (const char* moe : {"expert_count", "expert_used_count"})
      if (const GgufValue* v = keys.find(moe); v && v->as_int(keys.name(moe)) != 0)
        keys.fail("key '" + keys.name(moe) + "': a mixture of experts is not implemented for architecture '" +
                  spec->name + "'");
  }
  if (const GgufValue* c = keys.find("attention.causal"); c && !c->as_bool(keys.name("attention.causal")))
    keys.fail("key '" + keys.name("attention.causal") + "' is false: only causal decoders are implemented");
  keys.refuse_unread();

  const GgufTensorInfo& emb = f.tensor("token_embd.weight");
  if (emb.dims.size() != 2 || emb.dims[0] != static_cast<uint64_t>(hp.n_embd))
    keys.fail("tensor 'token_embd.weight' has shape " + dims_str(emb.dims) + ", expected [" +
              std::to_string(hp.n_embd) + ", n_vocab]");
  hp.n_vocab = static_cast<int32_t>(emb.dims[1]);
  hp.weight_type = emb.type;
  hp.tied_output = f.find_tensor("output.weight") == nullptr;
  if (hp.tied_output && !spec->output_may_be_tied) keys.fail("missing tensor 'output.weight'");
  if (spec->learned_positions) {
    const GgufTensorInfo& pos = f.tensor("position_embd.weight");
    if (pos.dims.size() != 2 || pos.dims[0] != static_cast<uint64_t>(hp.n_embd))
      keys.fail("tensor 'position_embd.weight' has shape " + dims_str(pos.dims) + ", expected [" +
                std::to_string(hp.n_embd) + ", n_positions]");
    hp.max_positions = static_cast<int32_t>(pos.dims[1]);
    hp.n_ctx_train = std::min(hp.n_ctx_train, hp.max_positions);  // no position has an embedding past the table
  }
  for (const GgufTensorInfo& t : f.tensors()) hp.n_params += static_cast<int64_t>(t.n_elements());
  return hp;
}

}  // namespace kvserve
