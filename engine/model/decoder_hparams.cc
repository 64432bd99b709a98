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

// Llama 3's and linear rotary scaling; YaRN and the others are refused by name.
void read_rope_scaling(ArchKeys& keys, DecoderHparams& hp) {
  std::string type = "none";
  if (const GgufValue* t = keys.find("rope.scaling.type")) type = t->as_string(keys.name("rope.scaling.type"));
  float factor = keys.get_float("rope.scaling.factor", 1.0f);
  if (const GgufValue* old = keys.find("rope.scale_linear")) {  // the key before rope.scaling.*
    type = "linear";
    factor = static_cast<float>(old->as_float(keys.name("rope.scale_linear")));
  }
  if (type == "linear") {
    if (!(factor > 0.0f)) keys.fail("rope scaling factor must be positive");
    hp.rope_freq_scale = 1.0f / factor;
  } else if (type != "none") {
    keys.fail("key '" + keys.name("rope.scaling.type") + "' is '" + type +
              "': only 'none' and 'linear' are implemented (Llama 3's scaling comes as rope_freqs.weight)");
  }
  // Informative for linear scaling: the context the model was trained at before it.
  keys.ignore("rope.scaling.original_context_length");
  keys.ignore("rope.scaling.finetuned");
  if (keys.get_float("rope.scaling.attn_factor", 1.0f) != 1.0f)
    keys.fail("key '" + keys.name("rope.scaling.attn_factor") + "' other than 1 is not implemented");
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
  if (value_length != hp.head_dim)
    keys.fail(keys.name("attention.value_length") + " " + std::to_string(value_length) +
              " differs from the key length " + std::to_string(hp.head_dim) + ": not implemented");
  hp.q_dim = hp.n_head * hp.head_dim;

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
  hp.ropes.push_back({hp.rope_base, hp.rope_freq_scale});
  if (spec->local_rope_base && hp.sliding_window > 0)
    hp.ropes.push_back({keys.get_float("rope.freq_base_swa", 10000.0f), 1.0f});
  else if (spec->local_rope_base)
    keys.ignore("rope.freq_base_swa");  // no layer is windowed: every layer uses rope.freq_base
  hp.layer_attn.resize(hp.n_layer);
  for (int l = 0; l < hp.n_layer; ++l) {
    const bool local = hp.sliding_window > 0 && period > 0 && (period == 1 || l % period < period - 1);
    hp.layer_attn[l] = {.window = local ? hp.sliding_window : 0, .rope = local && hp.ropes.size() > 1 ? 1 : 0};
    hp.layer_windows.push_back(hp.layer_attn[l].window);
  }
  const int32_t head_scale =
      spec->embd_query_scale_layers == hp.n_layer ? hp.n_embd / hp.n_head : hp.head_dim;
  hp.attn_scale = 1.0f / std::sqrt(static_cast<float>(head_scale));
  if (spec->scale_embedding) hp.embed_scale = std::sqrt(static_cast<float>(hp.n_embd));

  // Keys that hold for every decoder here or say nothing new.
  keys.ignore("vocab_size");          // the embedding's rows say it
  keys.ignore("tensor_data_layout");  // how an old converter ordered Q/K rows; the tensors are final
  for (const char* moe : {"expert_count", "expert_used_count"})
    if (const GgufValue* v = keys.find(moe); v && v->as_int(keys.name(moe)) != 0)
      keys.fail("key '" + keys.name(moe) + "': mixture-of-experts models are not implemented");
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
