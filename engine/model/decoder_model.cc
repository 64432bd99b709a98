#include "model/decoder_model.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "codecs/tensor_types.h"
#include "model/activations.h"
#include "model/scratch.h"
#include "weights/compute_context.h"

namespace kvserve {
namespace {

// The tensors a model reads, so that those it did not read can be refused by name.
class TensorUse {
 public:
  explicit TensorUse(const GgufFile& f) : f_(f) {}
  const std::string& use(const std::string& name) { return *used_.insert(name).first; }
  std::vector<TensorRef> use(std::vector<TensorRef> parts) {
    for (const TensorRef& p : parts) use(p.name);
    return parts;
  }
  bool has(const std::string& name) const { return f_.find_tensor(name) != nullptr; }
  std::vector<float> floats(const TensorRef& ref) {
    use(ref.name);
    return load_float_tensor(f_, ref);
  }
  // The tensor as floats if the file has it, else empty.
  std::vector<float> optional(const std::string& name, uint64_t n) {
    return has(name) ? floats({name, {n}}) : std::vector<float>{};
  }
  // Biases of stacked projections as one vector ([Σ sizes]), zeros where a part has none;
  // empty when no part has one.
  std::vector<float> stacked(const std::vector<std::pair<std::string, uint64_t>>& parts) {
    std::vector<float> out;
    uint64_t total = 0, at = 0;
    bool any = false;
    for (const auto& [name, n] : parts) {
      total += n;
      any = any || has(name);
    }
    if (!any) return out;
    out.assign(total, 0.0f);
    for (const auto& [name, n] : parts) {
      if (has(name)) {
        const std::vector<float> b = floats({name, {n}});
        std::copy(b.begin(), b.end(), out.begin() + static_cast<int64_t>(at));
      }
      at += n;
    }
    return out;
  }
  void refuse_unused(const std::string& arch) const {
    for (const GgufTensorInfo& t : f_.tensors())
      if (!used_.count(t.name))
        throw GgufError(f_.path() + ": tensor '" + t.name + "' is not used by this build's '" + arch +
                        "' decoder (not implemented)");
  }

 private:
  const GgufFile& f_;
  std::set<std::string> used_;
};

// Layer prefix p's mixture of experts: the router, then expert e's gate and up rows stacked as
// one matrix and its down matrix, each one matrix of the file's stacked [in, out, expert] tensors.
template <class MakeMatrix>
std::unique_ptr<MoeFfn> load_moe(const DecoderHparams& hp, TensorUse& use, MakeMatrix& matrix, const std::string& p,
                                 const KernelTable& kernels) {
  const uint64_t d = hp.n_embd, n = hp.routing.n_expert, ff = hp.n_ff_expert;
  MoeFfn::Weights w;
  w.router = matrix({{p + "ffn_gate_inp.weight", {d, n}}});
  w.router_bias = use.optional(p + "ffn_gate_inp.bias", n);
  for (uint64_t e = 0; e < n; ++e) {
    const auto slice = static_cast<int64_t>(e);
    MoeFfn::Expert x;
    x.gate_up = matrix({{p + "ffn_gate_exps.weight", {d, ff, n}, slice}, {p + "ffn_up_exps.weight", {d, ff, n}, slice}});
    x.down = matrix({{p + "ffn_down_exps.weight", {ff, d, n}, slice}});
    w.experts.push_back(std::move(x));
  }
  // Each expert's gate bias, then its up bias: the rows of its gate_up matrix.
  if (use.has(p + "ffn_gate_exps.bias") || use.has(p + "ffn_up_exps.bias")) {
    const std::vector<float> gate = use.floats({p + "ffn_gate_exps.bias", {ff, n}});
    const std::vector<float> up = use.floats({p + "ffn_up_exps.bias", {ff, n}});
    w.gate_up_bias.resize(2 * ff * n);
    for (uint64_t e = 0; e < n; ++e) {
      std::copy_n(gate.begin() + e * ff, ff, w.gate_up_bias.begin() + 2 * e * ff);
      std::copy_n(up.begin() + e * ff, ff, w.gate_up_bias.begin() + (2 * e + 1) * ff);
    }
  }
  if (use.has(p + "ffn_down_exps.bias")) w.down_bias = use.floats({p + "ffn_down_exps.bias", {d, n}});
  return std::make_unique<MoeFfn>(std::move(w), hp.routing, hp.n_embd, hp.n_ff_expert, hp.spec->ffn, kernels);
}

// Layer prefix p's latent attention. The heads' K and V up-projections come split (attn_k_b
// [nope, kv_lora, n_head], attn_v_b [kv_lora, v_head, n_head]), one matrix of each per head as
// stored; or, in files written before the split, as one attn_kv_b [kv_lora, n_head·(nope +
// v_head)], decoded and K's part transposed.
template <class MakeMatrix>
std::unique_ptr<MlaAttention> load_latent(const DecoderHparams& hp, TensorUse& use, MakeMatrix& matrix,
                                          ComputeContext& ctx, const GgufFile& f, const WeightPolicy& policy,
                                          const std::string& p, const KernelTable& kernels) {
  const ModelHparams::Latent& m = hp.mla;
  const uint64_t d = hp.n_embd, H = hp.n_head, nope = m.qk_nope_dim, rope = m.qk_rope_dim, lora = m.kv_lora_rank,
                 vd = m.v_head_dim, qd = uint64_t(hp.q_dim);
  MlaAttention::Weights w;
  if (m.q_lora_rank > 0) {
    const uint64_t qr = m.q_lora_rank;
    w.q_a = matrix({{p + "attn_q_a.weight", {d, qr}}});
    w.q_a_norm = use.floats({p + "attn_q_a_norm.weight", {qr}});
    w.q = matrix({{p + "attn_q_b.weight", {qr, qd}}});
  } else {
    w.q = matrix({{p + "attn_q.weight", {d, qd}}});
  }
  w.kv_a = matrix({{p + "attn_kv_a_mqa.weight", {d, lora + rope}}});
  w.kv_a_norm = use.floats({p + "attn_kv_a_norm.weight", {lora}});
  if (!use.has(p + "attn_kv_b.weight")) {
    for (uint64_t h = 0; h < H; ++h) {
      const auto slice = static_cast<int64_t>(h);
      w.k_b.push_back(matrix({{p + "attn_k_b.weight", {nope, lora, H}, slice}}));
      w.v_b.push_back(matrix({{p + "attn_v_b.weight", {lora, vd, H}, slice}}));
    }
  } else {
    const std::vector<float> kv_b = use.floats({p + "attn_kv_b.weight", {lora, H * (nope + vd)}});
    const TensorType stored = f.tensor(p + "attn_kv_b.weight").type;
    std::vector<float> kt(lora * nope);
    for (uint64_t h = 0; h < H; ++h) {
      const float* head = kv_b.data() + h * (nope + vd) * lora;  // nope rows of K, then vd rows of V
      for (uint64_t i = 0; i < nope; ++i)
        for (uint64_t r = 0; r < lora; ++r) kt[r * nope + i] = head[i * lora + r];
      w.k_b.push_back(make_weight_matrix(ctx, kt.data(), int64_t(lora), int64_t(nope), stored, policy));
      w.v_b.push_back(make_weight_matrix(ctx, head + nope * lora, int64_t(vd), int64_t(lora), stored, policy));
    }
  }
  return std::make_unique<MlaAttention>(std::move(w), m, hp.n_head, hp.norm_eps, kernels);
}

}  // namespace

DecoderModel::DecoderModel(const GgufFile& f, const WeightPolicy& policy, const KernelTable& kernels)
    : hp_(DecoderHparams::from_gguf(f)), k_(kernels), ctx_(std::make_unique<ComputeContext>(kernels)) {
  const ArchSpec& spec = *hp_.spec;
  const uint64_t d = hp_.n_embd, v = hp_.n_vocab, ff = hp_.n_ff, qd = hp_.q_dim;
  const uint64_t kvd = uint64_t(hp_.n_head_kv) * hp_.head_dim;
  if (const GgufValue* bos = f.find("tokenizer.ggml.bos_token_id")) {
    const int64_t id = bos->as_int("tokenizer.ggml.bos_token_id");
    if (id >= 0 && static_cast<uint64_t>(id) < v) anchor_token_ = static_cast<int32_t>(id);
  }
  TensorUse use(f);
  auto matrix = [&](std::vector<TensorRef> parts) { return make_weight_matrix(*ctx_, f, use.use(parts), policy); };
  auto norm = [&](const std::string& name) {
    Norm n;
    n.w = use.floats({name + ".weight", {d}});
    if (spec.norm == NormKind::kLayer) n.b = use.floats({name + ".bias", {d}});
    return n;
  };
  const TensorRef embd{use.use("token_embd.weight"), {d, v}};
  // A tied output multiplies the embedding's own held rows, except in F32 and BF16 files, whose
  // matrix make_weight_matrix builds from floats (a second copy, widened or kept BF16 by policy).
  const bool output_reuses_rows =
      hp_.tied_output && hp_.weight_type != TensorType::kF32 && hp_.weight_type != TensorType::kBF16;
  if (hp_.weight_type == TensorType::kF32) {
    embedding_ = load_float_tensor(f, embd);
    if (hp_.tied_output) output_ = make_weight_matrix(*ctx_, embedding_.data(), v, d, hp_.weight_type, policy);
  } else {
    // The file's rows, each token's decoded on lookup (BF16 exactly, at half the bytes of floats).
    embedding_held_ = hold_tensor(*ctx_, f, embd);
    if (output_reuses_rows) {
      output_ = make_held_matrix(*ctx_, {embedding_held_}, hp_.n_embd, policy);
    } else if (hp_.tied_output) {  // BF16: the floats decoded from the rows just held
      std::vector<float> w(v * d);
      tensor_type(embedding_held_.type).to_float(embedding_held_.data, w.data(), static_cast<int64_t>(v * d));
      output_ = make_weight_matrix(*ctx_, w.data(), v, d, hp_.weight_type, policy);
    }
  }
  if (spec.learned_positions) positions_ = use.floats({"position_embd.weight", {d, uint64_t(hp_.max_positions)}});
  if (spec.rope != RopeLayout::kNone && use.has("rope_freqs.weight") && !hp_.ropes.front().plain())
    throw GgufError(f.path() + ": rope_freqs.weight together with YaRN or a rope attention factor is not implemented");
  if (spec.rope != RopeLayout::kNone && use.has("rope_freqs.weight"))
    rope_freqs_ = use.floats({"rope_freqs.weight", {uint64_t(hp_.rope_dim / 2)}});
  out_norm_ = norm("output_norm");
  if (!hp_.tied_output) output_ = matrix({{"output.weight", {d, v}}});
  output_bias_ = use.optional("output.bias", v);
  hp_.held_as = output_->held_as();
  layers_.resize(hp_.n_layer);
  for (int l = 0; l < hp_.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer& L = layers_[l];
    L.attn_norm = norm(p + "attn_norm");
    L.ffn_norm = norm(p + spec.ffn_norm);
    if (spec.post_norms) {
      L.post_attn_norm = norm(p + "post_attention_norm");
      L.post_ffn_norm = norm(p + "post_ffw_norm");
    }
    // Q, K and V share one matmul: their rows stacked as one [q_dim + 2·kvd, d] matrix (or the
    // file's fused tensor, stacked the same way); so do the gate and up projections.
    AttnPart& A = L.attn;
    if (spec.attn == AttnKind::kLatent) {
      A.mla = load_latent(hp_, use, matrix, *ctx_, f, policy, p, k_);
    } else if (spec.fused_qkv) {
      A.qkv = matrix({{p + "attn_qkv.weight", {d, qd + 2 * kvd}}});
      A.qkv_bias = use.optional(p + "attn_qkv.bias", qd + 2 * kvd);
    } else {
      A.qkv = matrix({{p + "attn_q.weight", {d, qd}}, {p + "attn_k.weight", {d, kvd}}, {p + "attn_v.weight", {d, kvd}}});
      A.qkv_bias = use.stacked({{p + "attn_q.bias", qd}, {p + "attn_k.bias", kvd}, {p + "attn_v.bias", kvd}});
    }
    if (spec.attn_biases && A.qkv_bias.empty() && !A.mla)
      throw GgufError(f.path() + ": missing tensor '" + p + (spec.fused_qkv ? "attn_qkv.bias'" : "attn_q.bias'"));
    if (spec.qk_norm) {
      A.q_norm = use.floats({p + "attn_q_norm.weight", {uint64_t(hp_.head_dim)}});
      A.k_norm = use.floats({p + "attn_k_norm.weight", {uint64_t(hp_.head_dim)}});
    }
    if (spec.attn_sinks) A.sinks = use.floats({p + "attn_sinks.weight", {uint64_t(hp_.n_head)}});
    A.wo = matrix({{p + "attn_output.weight", {uint64_t(hp_.n_head) * hp_.v_dim, d}}});
    A.wo_bias = use.optional(p + "attn_output.bias", d);
    FfnPart& F = L.ffn;
    F.ff = ff;
    if (hp_.routing.n_expert > 0 && l >= hp_.n_dense_lead) {
      F.moe = load_moe(hp_, use, matrix, p, k_);
      if (hp_.n_ff_shared > 0) {  // the shared experts: one SwiGLU on every token
        const uint64_t sh = hp_.n_ff_shared;
        F.ff = sh;
        F.gate_up = matrix({{p + "ffn_gate_shexp.weight", {d, sh}}, {p + "ffn_up_shexp.weight", {d, sh}}});
        F.down = matrix({{p + "ffn_down_shexp.weight", {sh, d}}});
      }
      continue;
    }
    if (spec.ffn == FfnKind::kGelu) {
      F.gate_up = matrix({{p + "ffn_up.weight", {d, ff}}});
      F.gate_up_bias = use.optional(p + "ffn_up.bias", ff);
    } else if (spec.fused_gate_up) {
      F.gate_up = matrix({{p + "ffn_up.weight", {d, 2 * ff}}});
      F.gate_up_bias = use.optional(p + "ffn_up.bias", 2 * ff);
    } else {
      F.gate_up = matrix({{p + "ffn_gate.weight", {d, ff}}, {p + "ffn_up.weight", {d, ff}}});
      F.gate_up_bias = use.stacked({{p + "ffn_gate.bias", ff}, {p + "ffn_up.bias", ff}});
    }
    F.down = matrix({{p + "ffn_down.weight", {ff, d}}});
    F.down_bias = use.optional(p + "ffn_down.bias", d);
  }
  use.refuse_unused(hp_.architecture);

  std::map<TensorType, int64_t> file, held;
  std::map<std::string, std::string> plan;
  for (const GgufTensorInfo& t : f.tensors()) file[t.type] += static_cast<int64_t>(t.n_bytes());
  const auto count = [&](const WeightMatrix& m) {
    m.count_bytes(held);
    m.describe_plan(plan);
    hp_.bytes_per_step += m.bytes();
    hp_.panel_bytes += m.panel_bytes();
  };
  for (const Layer& L : layers_) {
    if (L.attn.mla) {
      L.attn.mla->count_bytes(held);
      L.attn.mla->describe_plan(plan);
      hp_.bytes_per_step += L.attn.mla->bytes();
      hp_.panel_bytes += L.attn.mla->panel_bytes();
    } else {
      count(*L.attn.qkv);
    }
    count(*L.attn.wo);
    if (L.ffn.moe) {  // a decode step reads the router and the chosen experts
      L.ffn.moe->count_bytes(held);
      L.ffn.moe->describe_plan(plan);
      hp_.bytes_per_step += L.ffn.moe->bytes_per_token();
      hp_.expert_bytes += L.ffn.moe->expert_bytes();
      hp_.n_expert = L.ffn.moe->routing().n_expert;
      hp_.n_expert_used = L.ffn.moe->routing().n_used;
      hp_.panel_bytes += L.ffn.moe->panel_bytes();
    }
    for (const auto* m : {L.ffn.gate_up.get(), L.ffn.down.get()})
      if (m) count(*m);
  }
  count(*output_);
  if (!output_reuses_rows) {  // the embedding's memory besides the matrices (one row a token is read)
    if (embedding_held_.data)
      held[embedding_held_.type] += embedding_held_.rows * embedding_held_.row_bytes;
    else
      held[TensorType::kF32] += static_cast<int64_t>(embedding_.size() * sizeof(float));
  }
  // Norms, biases and position tables, all held as F32.
  auto floats = [](const Norm& n) { return static_cast<int64_t>(n.w.size() + n.b.size()); };
  int64_t small = floats(out_norm_) + static_cast<int64_t>(output_bias_.size() + positions_.size() + rope_freqs_.size());
  for (const Layer& L : layers_)
    small += floats(L.attn_norm) + floats(L.ffn_norm) + floats(L.post_attn_norm) + floats(L.post_ffn_norm) +
             static_cast<int64_t>(L.attn.qkv_bias.size() + L.attn.wo_bias.size() + L.attn.q_norm.size() +
                                  L.attn.k_norm.size() + L.attn.sinks.size() + L.ffn.gate_up_bias.size() + L.ffn.down_bias.size()) +
             (L.ffn.moe ? L.ffn.moe->small_floats() : 0) + (L.attn.mla ? L.attn.mla->small_floats() : 0);
  held[TensorType::kF32] += small * static_cast<int64_t>(sizeof(float));
  for (const auto& [type, n] : held) hp_.weight_bytes += n;
  hp_.file_types = tensor_type_mix(file);
  hp_.held_types = tensor_type_mix(held);
  for (const auto& [what, paths] : plan) hp_.matmul_plan += (hp_.matmul_plan.empty() ? "" : "; ") + what + ": " + paths;
  if (hp_.panel_bytes > 0)
    hp_.held_types += "; " + std::to_string((100 * hp_.panel_bytes + hp_.weight_bytes / 2) / hp_.weight_bytes) +
                      "% in 16-row panels";
}

DecoderModel::~DecoderModel() = default;

void DecoderModel::warm_up(int64_t max_rows) {
  const bool post = hp_.spec->post_norms;  // the residual add is fused unless a post-norm comes first
  for (Layer& L : layers_) {
    if (L.attn.mla)
      L.attn.mla->prepare(max_rows);
    else
      L.attn.qkv->prepare(max_rows, false);
    L.attn.wo->prepare(max_rows, !post);
    if (L.ffn.moe) L.ffn.moe->prepare(max_rows);
    if (!L.ffn.gate_up) continue;
    L.ffn.gate_up->prepare(max_rows, false);
    L.ffn.down->prepare(max_rows, !post);
  }
  output_->prepare(max_rows, false);
}

void DecoderModel::norm(const Norm& n, const float* x, int64_t rows, float* out) const {
  if (n.b.empty())
    k_.rms_norm(x, n.w.data(), rows, hp_.n_embd, hp_.norm_eps, out);
  else
    k_.layer_norm(x, n.w.data(), n.b.data(), rows, hp_.n_embd, hp_.norm_eps, out);
}

void DecoderModel::add_to_residual(WeightMatrix& w, const std::vector<float>& bias, const Norm& post_norm,
                                   const float* in, int64_t rows) {
  const int64_t D = hp_.n_embd;
  if (post_norm.w.empty()) {  // x += W·in + b, the add fused into the matmul
    w.forward(in, rows, x_.data(), /*accumulate=*/true);
    if (!bias.empty()) k_.add_bias(x_.data(), rows, D, bias.data(), D);
    return;
  }
  w.forward(in, rows, h_.data());  // x += post_norm(W·in + b)
  if (!bias.empty()) k_.add_bias(h_.data(), rows, D, bias.data(), D);
  norm(post_norm, h_.data(), rows, h_.data());
  k_.add_bias(x_.data(), 1, rows * D, h_.data(), rows * D);
}

void DecoderModel::zero_masked_heads(const BatchInputs& in, int layer, int64_t rows) {
  const int64_t hd = hp_.v_dim, width = int64_t{hp_.n_head} * hp_.v_dim;
  for (int64_t t = 0; t < rows; ++t) {
    const uint8_t* mask = in.head_mask[t];
    if (!mask) continue;
    for (int h = 0; h < hp_.n_head; ++h)
      if (mask[layer * hp_.n_head + h]) std::fill_n(attn_.data() + t * width + h * hd, hd, 0.0f);
  }
}

void DecoderModel::attend(const BatchInputs& in, KvStorage& kv, int l, const float* q, int64_t q_stride, const float* k,
                          const float* v, int64_t kv_stride, float* out) {
  const int64_t T = in.size();
  float* const* capture = nullptr;
  if (!in.attn_capture.empty()) {
    for (int64_t t = 0; t < T; ++t) {
      const int64_t n = in.attn_capture_len[t];
      cap_ptrs_[t] = in.attn_capture[t] ? in.attn_capture[t] + int64_t{l} * hp_.n_head * n * n : nullptr;
    }
    capture = cap_ptrs_.data();
  }
  // The block tables and slots of this layer's group (kv_cache/kv_layout.h).
  const int32_t group = kv.layout().layer_group[l];
  const int32_t* tables = in.group_tables(group, kv.layout().n_groups());
  const int64_t* slots = in.group_slots(group);
  const std::vector<float>& sink_logits = layers_[l].attn.sinks;
  const float* sinks = sink_logits.empty() ? nullptr : sink_logits.data();
  // Store this step's K/V, then attend; KvT is the cache's element type.
  auto args = [&]<class KvT>(KvT* k_cache, KvT* v_cache) {
    return PagedAttentionArgs<KvT>{.q = q, .rows = T, .q_stride = q_stride, .k_cache = k_cache, .v_cache = v_cache,
                                   .block_tables = tables, .max_blocks = in.max_blocks,
                                   .token_seq = in.token_seq.data(), .ctx_lens = ctx_lens_.data(),
                                   .n_head = hp_.n_head, .n_kv = hp_.n_head_kv, .head_dim = hp_.head_dim,
                                   .block_size = kv.block_size(), .scale = hp_.attn_scale,
                                   .window = hp_.window_of(l), .soft_cap = hp_.attn_soft_cap,
                                   .sinks = sinks, .v_dim = hp_.mla.on() ? hp_.mla.kv_lora_rank : 0, .out = out,
                                   .capture = capture, .capture_head_stride = cap_strides_.data()};
  };
  auto store_and_attend = [&]<class KvT>(KvT* k_cache, KvT* v_cache) {
    k_.write_kv(k_cache)(k, v, T, kv_stride, slots, hp_.n_head_kv, hp_.head_dim, kv.block_size(), k_cache,
                         v_cache);
    k_.paged_attention(args(k_cache, v_cache));
  };
  if (kv.q8()) {
    int8_t *kc = kv.k<int8_t>(l), *vc = kv.v<int8_t>(l);
    const int64_t kv_dim = int64_t{hp_.n_head_kv} * hp_.head_dim;
    const float* anchor = kv_anchor_.data() + 2 * l * kv_dim;  // this layer's K anchor, then its V anchor
    k_.write_kv_q8(k, v, T, kv_stride, slots, in.positions.data(), anchor, anchor + kv_dim,
                   hp_.n_head_kv, hp_.head_dim, kv.block_size(), kc, vc, kv.k_scales(l), kv.v_scales(l));
    PagedAttentionArgs<int8_t> a = args(kc, vc);
    a.k_scales = kv.k_scales(l);
    a.v_scales = kv.v_scales(l);
    a.k_anchor = anchor;
    a.v_anchor = vc ? anchor + kv_dim : nullptr;
    k_.paged_attention(a);
  } else if (kv.half()) {
    store_and_attend(kv.k<_Float16>(l), kv.v<_Float16>(l));
  } else {
    store_and_attend(kv.k<float>(l), kv.v<float>(l));
  }
}

void DecoderModel::run_attention(const BatchInputs& in, KvStorage& kv, int l) {
  const AttnPart& A = layers_[l].attn;
  const int64_t T = in.size(), hd = hp_.head_dim, q_dim = hp_.q_dim, kv_dim = int64_t{hp_.n_head_kv} * hd;
  const int64_t qkv_dim = q_dim + 2 * kv_dim;
  if (A.mla) {  // latent attention: absorbed queries over the cached latents, then each head's value
    const int64_t width = A.mla->row_width();
    const float* cs = rope_cs_.data() + int64_t{hp_.layer_attn[l].rope} * T * hp_.rope_dim;
    A.mla->project(h_.data(), T, cs, mla_q_.data(), mla_rows_.data());
    attend(in, kv, l, mla_q_.data(), hp_.n_head * width, mla_rows_.data(), nullptr, width, mla_o_.data());
    A.mla->expand(mla_o_.data(), T, attn_.data());
    if (!in.head_mask.empty()) zero_masked_heads(in, l, T);
    add_to_residual(*A.wo, A.wo_bias, layers_[l].post_attn_norm, attn_.data(), T);
    return;
  }
  A.qkv->forward(h_.data(), T, qkv_.data());
  if (!A.qkv_bias.empty()) k_.add_bias(qkv_.data(), T, qkv_dim, A.qkv_bias.data(), qkv_dim);
  float* q = qkv_.data();
  float* k = q + q_dim;
  float* v = k + kv_dim;
  if (!A.q_norm.empty())  // every head of every token normed on its own, in place
    for (int64_t t = 0; t < T; ++t) {
      k_.rms_norm(q + t * qkv_dim, A.q_norm.data(), hp_.n_head, hd, hp_.norm_eps, q + t * qkv_dim);
      k_.rms_norm(k + t * qkv_dim, A.k_norm.data(), hp_.n_head_kv, hd, hp_.norm_eps, k + t * qkv_dim);
    }
  if (hp_.spec->rope != RopeLayout::kNone) {
    const bool neox = hp_.spec->rope == RopeLayout::kNeox;
    const float* cs = rope_cs_.data() + int64_t{hp_.layer_attn[l].rope} * T * hp_.rope_dim;
    k_.rope(q, T, qkv_dim, cs, hp_.n_head, hd, hp_.rope_dim, neox);
    k_.rope(k, T, qkv_dim, cs, hp_.n_head_kv, hd, hp_.rope_dim, neox);
  }
  attend(in, kv, l, q, qkv_dim, k, v, qkv_dim, attn_.data());
  if (!in.head_mask.empty()) zero_masked_heads(in, l, T);
  add_to_residual(*A.wo, A.wo_bias, layers_[l].post_attn_norm, attn_.data(), T);
}

void DecoderModel::run_ffn(int l, int64_t T) {
  const FfnPart& F = layers_[l].ffn;
  if (F.moe) F.moe->forward(h_.data(), T, x_.data());
  if (!F.gate_up) return;
  const int64_t ff = F.ff, gu_dim = hp_.spec->ffn == FfnKind::kGelu ? ff : 2 * ff;
  F.gate_up->forward(h_.data(), T, gu_.data());
  if (!F.gate_up_bias.empty()) k_.add_bias(gu_.data(), T, gu_dim, F.gate_up_bias.data(), gu_dim);
  switch (hp_.spec->ffn) {
    case FfnKind::kSwiGlu: k_.silu_mul(gu_.data(), T, ff, act_.data()); break;
    case FfnKind::kGeGluTanh: k_.gelu_mul(gu_.data(), T, ff, act_.data()); break;
    case FfnKind::kGelu: k_.gelu(gu_.data(), T * ff, act_.data()); break;
    case FfnKind::kSwiGluOai: swiglu_oai(gu_.data(), T, ff, act_.data()); break;
  }
  add_to_residual(*F.down, F.down_bias, layers_[l].post_ffn_norm, act_.data(), T);
}

void DecoderModel::compute_kv_anchor() {
  const int64_t kv_dim = int64_t{hp_.n_head_kv} * hp_.head_dim;
  KvStorage scratch(kv_shape(), /*block_size=*/1, /*num_blocks=*/1);  // f32, one slot
  BatchInputs in;
  in.tokens = {anchor_token_};
  in.positions = {0};
  in.token_seq = {0};
  in.slots = {0};
  in.block_tables = {0};
  in.max_blocks = 1;
  in.logit_rows = {0};
  forward(in, scratch);
  // With one slot per block, each layer's K and V are n_kv·head_dim floats in head order.
  kv_anchor_.resize(static_cast<size_t>(hp_.n_layer) * 2 * kv_dim);
  for (int l = 0; l < hp_.n_layer; ++l) {
    std::copy_n(scratch.k<float>(l), kv_dim, kv_anchor_.data() + 2 * l * kv_dim);
    if (const float* v = scratch.v<float>(l)) std::copy_n(v, kv_dim, kv_anchor_.data() + (2 * l + 1) * kv_dim);
  }
}

const float* DecoderModel::forward(const BatchInputs& in, KvStorage& kv) {
  if (kv.q8() && kv_anchor_.empty()) compute_kv_anchor();
  const ArchSpec& spec = *hp_.spec;
  const int64_t T = in.size(), D = hp_.n_embd, F = std::max(hp_.n_ff, hp_.n_ff_shared);
  const int64_t q_dim = hp_.q_dim, qkv_dim = q_dim + 2 * int64_t{hp_.n_head_kv} * hp_.head_dim;
  const int64_t gu_dim = spec.ffn == FfnKind::kGelu ? F : 2 * F;
  const int64_t R = static_cast<int64_t>(in.logit_rows.size());
  // The matmuls' inputs and outputs hold their padded row counts (see WeightMatrix::padded_rows).
  const int64_t Tp = WeightMatrix::padded_rows(T), Rp = WeightMatrix::padded_rows(R);
  grow(x_, Tp * D);
  grow(h_, Tp * D);
  grow(qkv_, Tp * qkv_dim);
  grow(attn_, Tp * std::max<int64_t>(q_dim, int64_t{hp_.n_head} * hp_.v_dim));
  if (hp_.mla.on()) {
    const int64_t width = int64_t{hp_.mla.kv_lora_rank} + hp_.mla.qk_rope_dim;
    grow(mla_q_, Tp * hp_.n_head * width);
    grow(mla_rows_, Tp * width);
    grow(mla_o_, Tp * hp_.n_head * hp_.mla.kv_lora_rank);
  }
  grow(gu_, Tp * gu_dim);
  grow(act_, Tp * F);
  grow(last_, Rp * D);
  grow(logits_, Rp * hp_.n_vocab);
  grow(ctx_lens_, T);
  if (spec.rope != RopeLayout::kNone) {
    const int64_t n = static_cast<int64_t>(hp_.ropes.size());
    grow(rope_cs_, n * T * hp_.rope_dim);
    for (int64_t r = 0; r < n; ++r) {
      const DecoderHparams::Rope& rope = hp_.ropes[r];
      float* cs = rope_cs_.data() + r * T * hp_.rope_dim;
      if (rope.plain())
        k_.rope_angles(in.positions.data(), T, hp_.rope_dim, rope.base, rope.freq_scale,
                       rope_freqs_.empty() ? nullptr : rope_freqs_.data(), cs);
      else
        yarn_rope_angles(in.positions.data(), T, hp_.rope_dim, rope.base, rope.freq_scale, rope.yarn, cs);
    }
  }
  for (int64_t t = 0; t < T; ++t) ctx_lens_[t] = in.positions[t] + 1;
  if (!in.attn_capture.empty()) {
    cap_ptrs_.resize(T);
    cap_strides_.resize(T);
    for (int64_t t = 0; t < T; ++t) cap_strides_[t] = int64_t{in.attn_capture_len[t]} * in.attn_capture_len[t];
  }

  if (embedding_held_.data)
    for (int64_t t = 0; t < T; ++t) embedding_held_.decode_row(in.tokens[t], x_.data() + t * D, D);
  else
    k_.embed(embedding_.data(), in.tokens.data(), T, D, x_.data());
  if (hp_.embed_scale != 1.0f)
    for (int64_t i = 0; i < T * D; ++i) x_[i] *= hp_.embed_scale;
  // Positions past the table cannot come: the context length is capped at its rows (hparams).
  for (int64_t t = 0; !positions_.empty() && t < T; ++t)
    k_.add_bias(x_.data() + t * D, 1, D, positions_.data() + int64_t{in.positions[t]} * D, D);

  for (int l = 0; l < hp_.n_layer; ++l) {
    Layer& L = layers_[l];
    norm(L.attn_norm, x_.data(), T, h_.data());
    run_attention(in, kv, l);
    norm(L.ffn_norm, x_.data(), T, h_.data());
    run_ffn(l, T);
  }
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(last_.data() + r * D, x_.data() + int64_t{in.logit_rows[r]} * D, D * sizeof(float));
  norm(out_norm_, last_.data(), R, last_.data());
  output_->forward(last_.data(), R, logits_.data());
  const int64_t V = hp_.n_vocab;
  if (!output_bias_.empty()) k_.add_bias(logits_.data(), R, V, output_bias_.data(), V);
  if (hp_.final_soft_cap > 0.0f) k_.soft_cap(logits_.data(), R * V, hp_.final_soft_cap);
  return logits_.data();
}

}  // namespace kvserve
