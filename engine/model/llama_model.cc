#include "model/llama_model.h"

#include <omp.h>

#include <cmath>
#include <cstring>

#include "model/arch_spec.h"
#include "weights/compute_context.h"

namespace kvserve {
namespace {

int32_t meta_int(const GgufFile& f, const std::string& key, int64_t fallback, bool required) {
  const GgufValue* v = f.find(key);
  if (!v) {
    if (required) throw GgufError(f.path() + ": missing metadata key '" + key + "'");
    return static_cast<int32_t>(fallback);
  }
  int64_t x = v->as_int(key);
  if (x <= 0 || x > (int64_t{1} << 30))
    throw GgufError(f.path() + ": key '" + key + "' has out-of-range value " + std::to_string(x));
  return static_cast<int32_t>(x);
}

float meta_float(const GgufFile& f, const std::string& key, float fallback) {
  const GgufValue* v = f.find(key);
  return v ? static_cast<float>(v->as_float(key)) : fallback;
}

std::string dims_str(const std::vector<uint64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

template <typename T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

LlamaHparams LlamaHparams::from_gguf(const GgufFile& f) {
  const std::string& arch = f.get("general.architecture").as_string("general.architecture");
  const ArchSpec* spec = find_arch_spec(arch);
  if (!spec)
    throw GgufError(f.path() + ": unsupported architecture '" + arch + "' (supported: " + implemented_architectures() + ")");
  // This forward pass implements the llama-style spec; anything else needs its own code first.
  if (spec->norm != NormKind::kRms || spec->rope != RopeLayout::kAdjacentPairs || spec->ffn != FfnKind::kSwiGlu ||
      spec->attn_biases || spec->fused_qkv || spec->fused_gate_up || spec->learned_positions || spec->post_norms ||
      spec->scale_embedding || spec->attn_logit_softcap || spec->final_logit_softcap || spec->sliding_window)
    throw GgufError(f.path() + ": architecture '" + arch + "' needs features this build's decoder lacks");
  const auto key = [&](const char* suffix) { return spec->key(suffix); };
  LlamaHparams hp;
  hp.architecture = arch;
  if (const GgufValue* n = f.find("general.name")) hp.name = n->as_string("general.name");
  hp.n_embd = meta_int(f, key("embedding_length"), 0, true);
  hp.n_layer = meta_int(f, key("block_count"), 0, true);
  hp.n_head = meta_int(f, key("attention.head_count"), 0, true);
  hp.n_head_kv = meta_int(f, key("attention.head_count_kv"), hp.n_head, false);
  hp.n_ff = meta_int(f, key("feed_forward_length"), 0, true);
  hp.n_ctx_train = meta_int(f, key("context_length"), 2048, false);
  if (hp.n_embd % hp.n_head != 0)
    throw GgufError(f.path() + ": " + key("embedding_length") + " " + std::to_string(hp.n_embd) +
                    " is not a multiple of " + key("attention.head_count") + " " + std::to_string(hp.n_head));
  if (hp.n_head % hp.n_head_kv != 0)
    throw GgufError(f.path() + ": " + key("attention.head_count_kv") + " " + std::to_string(hp.n_head_kv) +
                    " does not divide " + key("attention.head_count") + " " + std::to_string(hp.n_head));
  hp.head_dim = hp.n_embd / hp.n_head;
  hp.rope_dim = meta_int(f, key("rope.dimension_count"), hp.head_dim, false);
  if (hp.rope_dim > hp.head_dim || hp.rope_dim % 2 != 0)
    throw GgufError(f.path() + ": " + key("rope.dimension_count") + " " + std::to_string(hp.rope_dim) +
                    " must be even and at most the head dimension " + std::to_string(hp.head_dim));
  hp.rope_base = meta_float(f, key("rope.freq_base"), 10000.0f);
  hp.rms_eps = meta_float(f, key("attention.layer_norm_rms_epsilon"), 1e-5f);
  if (!(hp.rope_base > 0.0f) || !(hp.rms_eps > 0.0f))
    throw GgufError(f.path() + ": rope.freq_base and layer_norm_rms_epsilon must be positive");
  const GgufTensorInfo& emb = f.tensor("token_embd.weight");
  if (emb.dims.size() != 2 || emb.dims[0] != static_cast<uint64_t>(hp.n_embd))
    throw GgufError(f.path() + ": tensor 'token_embd.weight' has shape " + dims_str(emb.dims) +
                    ", expected [" + std::to_string(hp.n_embd) + ", n_vocab]");
  hp.n_vocab = static_cast<int32_t>(emb.dims[1]);
  hp.weight_type = emb.type;
  hp.tied_output = f.find_tensor("output.weight") == nullptr;
  const int64_t d = hp.n_embd, kv = int64_t{hp.n_head_kv} * hp.head_dim;
  hp.n_params = int64_t{hp.n_vocab} * d * (hp.tied_output ? 1 : 2) + d +
                hp.n_layer * (2 * d + d * d * 2 + 2 * d * kv + 3 * d * hp.n_ff);
  return hp;
}

LlamaModel::LlamaModel(const GgufFile& f, const WeightPolicy& policy, const KernelTable& kernels)
    : hp_(LlamaHparams::from_gguf(f)), k_(kernels), ctx_(std::make_unique<ComputeContext>(kernels)) {
  const uint64_t d = hp_.n_embd, v = hp_.n_vocab, ff = hp_.n_ff;
  const uint64_t kvd = uint64_t(hp_.n_head_kv) * hp_.head_dim;
  auto matrix = [&](std::vector<TensorRef> parts) { return make_weight_matrix(*ctx_, f, parts, policy); };
  const TensorRef embd{"token_embd.weight", {d, v}};
  if (hp_.weight_type == TensorType::kF32 || hp_.weight_type == TensorType::kBF16) {
    embedding_ = load_float_tensor(f, embd);
    if (hp_.tied_output) output_ = make_weight_matrix(*ctx_, embedding_.data(), v, d, hp_.weight_type, policy);
  } else {
    embedding_held_ = hold_tensor(*ctx_, f, embd);
    if (hp_.tied_output) output_ = make_held_matrix(*ctx_, {embedding_held_}, hp_.n_embd, policy);
  }
  out_norm_ = load_float_tensor(f, {"output_norm.weight", {d}});
  if (!hp_.tied_output) output_ = matrix({{"output.weight", {d, v}}});
  hp_.held_as = output_->held_as();
  layers_.resize(hp_.n_layer);
  for (int l = 0; l < hp_.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer& L = layers_[l];
    L.attn_norm = load_float_tensor(f, {p + "attn_norm.weight", {d}});
    L.ffn_norm = load_float_tensor(f, {p + "ffn_norm.weight", {d}});
    // Q, K and V share one matmul: their rows stacked as one [d + 2·kvd, d] matrix; so do the
    // gate and up projections.
    L.qkv = matrix({{p + "attn_q.weight", {d, d}}, {p + "attn_k.weight", {d, kvd}}, {p + "attn_v.weight", {d, kvd}}});
    L.wo = matrix({{p + "attn_output.weight", {d, d}}});
    L.gate_up = matrix({{p + "ffn_gate.weight", {d, ff}}, {p + "ffn_up.weight", {d, ff}}});
    L.down = matrix({{p + "ffn_down.weight", {ff, d}}});
  }
  std::map<TensorType, int64_t> file, held;
  for (const GgufTensorInfo& t : f.tensors()) file[t.type] += static_cast<int64_t>(t.n_bytes());
  const auto count = [&](const WeightMatrix& m) {
    m.count_bytes(held);
    hp_.bytes_per_step += m.bytes();
  };
  for (const Layer& L : layers_)
    for (const auto* m : {L.qkv.get(), L.wo.get(), L.gate_up.get(), L.down.get()}) count(*m);
  count(*output_);
  if (!hp_.tied_output) {  // the embedding's memory besides the matrices (one row a token is read)
    if (embedding_held_.data)
      held[embedding_held_.type] += embedding_held_.rows * embedding_held_.row_bytes;
    else
      held[TensorType::kF32] += static_cast<int64_t>(embedding_.size() * sizeof(float));
  }
  int64_t norms = static_cast<int64_t>(out_norm_.size());
  for (const Layer& L : layers_) norms += static_cast<int64_t>(L.attn_norm.size() + L.ffn_norm.size());
  held[TensorType::kF32] += norms * static_cast<int64_t>(sizeof(float));
  for (const auto& [type, n] : held) hp_.weight_bytes += n;
  hp_.file_types = tensor_type_mix(file);
  hp_.held_types = tensor_type_mix(held);
}

LlamaModel::~LlamaModel() = default;

void LlamaModel::warm_up(int64_t max_rows) {
  for (Layer& L : layers_) {
    L.qkv->prepare(max_rows, false);
    L.wo->prepare(max_rows, true);  // the residual add is fused
    L.gate_up->prepare(max_rows, false);
    L.down->prepare(max_rows, true);
  }
  output_->prepare(max_rows, false);
}

void LlamaModel::zero_masked_heads(const BatchInputs& in, int layer, int64_t rows) {
  const int64_t hd = hp_.head_dim, width = int64_t{hp_.n_head} * hd;
  for (int64_t t = 0; t < rows; ++t) {
    const uint8_t* mask = in.head_mask[t];
    if (!mask) continue;
    for (int h = 0; h < hp_.n_head; ++h)
      if (mask[layer * hp_.n_head + h]) std::fill_n(attn_.data() + t * width + h * hd, hd, 0.0f);
  }
}

const float* LlamaModel::forward(const BatchInputs& in, KvStorage& kv) {
  const int64_t T = in.size(), D = hp_.n_embd, F = hp_.n_ff;
  const int64_t q_dim = D, kv_dim = int64_t{hp_.n_head_kv} * hp_.head_dim;
  const int64_t qkv_dim = q_dim + 2 * kv_dim;
  const int64_t R = static_cast<int64_t>(in.logit_rows.size());
  // The matmuls' inputs and outputs hold their padded row counts (see WeightMatrix::padded_rows).
  const int64_t Tp = WeightMatrix::padded_rows(T), Rp = WeightMatrix::padded_rows(R);
  grow(x_, Tp * D);
  grow(h_, Tp * D);
  grow(qkv_, Tp * qkv_dim);
  grow(attn_, Tp * q_dim);
  grow(gu_, Tp * 2 * F);
  grow(act_, Tp * F);
  grow(last_, Rp * D);
  grow(logits_, Rp * hp_.n_vocab);
  grow(ctx_lens_, T);
  grow(rope_cs_, T * hp_.rope_dim);
  k_.rope_angles(in.positions.data(), T, hp_.rope_dim, hp_.rope_base, rope_cs_.data());
  for (int64_t t = 0; t < T; ++t) ctx_lens_[t] = in.positions[t] + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hp_.head_dim));
  if (!in.attn_capture.empty()) {
    cap_ptrs_.resize(T);
    cap_strides_.resize(T);
    for (int64_t t = 0; t < T; ++t) cap_strides_[t] = int64_t{in.attn_capture_len[t]} * in.attn_capture_len[t];
  }

  if (embedding_held_.data)
    for (int64_t t = 0; t < T; ++t) embedding_held_.decode_row(in.tokens[t], x_.data() + t * D, D);
  else
    k_.embed(embedding_.data(), in.tokens.data(), T, D, x_.data());
  for (int l = 0; l < hp_.n_layer; ++l) {
    Layer& L = layers_[l];
    k_.rms_norm(x_.data(), L.attn_norm.data(), T, D, hp_.rms_eps, h_.data());
    L.qkv->forward(h_.data(), T, qkv_.data());
    float* q = qkv_.data();
    float* k = q + q_dim;
    float* v = k + kv_dim;
    k_.rope(q, T, qkv_dim, rope_cs_.data(), hp_.n_head, hp_.head_dim, hp_.rope_dim);
    k_.rope(k, T, qkv_dim, rope_cs_.data(), hp_.n_head_kv, hp_.head_dim, hp_.rope_dim);
    float* const* capture = nullptr;
    if (!in.attn_capture.empty()) {
      for (int64_t t = 0; t < T; ++t) {
        const int64_t n = in.attn_capture_len[t];
        cap_ptrs_[t] = in.attn_capture[t] ? in.attn_capture[t] + int64_t{l} * hp_.n_head * n * n : nullptr;
      }
      capture = cap_ptrs_.data();
    }
    // Store this step's K/V, then attend; KvT is the cache's element type.
    auto store_and_attend = [&]<class KvT>(KvT* k_cache, KvT* v_cache) {
      k_.write_kv(k_cache)(k, v, T, qkv_dim, in.slots.data(), hp_.n_head_kv, hp_.head_dim, kv.block_size(), k_cache, v_cache);
      k_.paged_attention(PagedAttentionArgs<KvT>{.q = q, .rows = T, .q_stride = qkv_dim, .k_cache = k_cache,
                                                 .v_cache = v_cache, .block_tables = in.block_tables.data(),
                                                 .max_blocks = in.max_blocks, .token_seq = in.token_seq.data(),
                                                 .ctx_lens = ctx_lens_.data(), .n_head = hp_.n_head,
                                                 .n_kv = hp_.n_head_kv, .head_dim = hp_.head_dim,
                                                 .block_size = kv.block_size(), .scale = scale, .out = attn_.data(),
                                                 .capture = capture, .capture_head_stride = cap_strides_.data()});
    };
    if (kv.q8()) {
      int8_t *kc = kv.k<int8_t>(l), *vc = kv.v<int8_t>(l);
      k_.write_kv_q8(k, v, T, qkv_dim, in.slots.data(), hp_.n_head_kv, hp_.head_dim, kv.block_size(), kc, vc,
                     kv.k_scales(l), kv.v_scales(l));
      k_.paged_attention(PagedAttentionArgs<int8_t>{
          .q = q, .rows = T, .q_stride = qkv_dim, .k_cache = kc, .v_cache = vc, .block_tables = in.block_tables.data(),
          .max_blocks = in.max_blocks, .token_seq = in.token_seq.data(), .ctx_lens = ctx_lens_.data(),
          .n_head = hp_.n_head, .n_kv = hp_.n_head_kv, .head_dim = hp_.head_dim, .block_size = kv.block_size(),
          .scale = scale, .out = attn_.data(), .capture = capture, .capture_head_stride = cap_strides_.data(),
          .k_scales = kv.k_scales(l), .v_scales = kv.v_scales(l)});
    } else if (kv.half()) {
      store_and_attend(kv.k<_Float16>(l), kv.v<_Float16>(l));
    } else {
      store_and_attend(kv.k<float>(l), kv.v<float>(l));
    }
    if (!in.head_mask.empty()) zero_masked_heads(in, l, T);
    L.wo->forward(attn_.data(), T, x_.data(), /*accumulate=*/true);
    k_.rms_norm(x_.data(), L.ffn_norm.data(), T, D, hp_.rms_eps, h_.data());
    L.gate_up->forward(h_.data(), T, gu_.data());
    k_.silu_mul(gu_.data(), T, F, act_.data());
    L.down->forward(act_.data(), T, x_.data(), /*accumulate=*/true);
  }
  for (int64_t r = 0; r < R; ++r)
    std::memcpy(last_.data() + r * D, x_.data() + int64_t{in.logit_rows[r]} * D, D * sizeof(float));
  k_.rms_norm(last_.data(), out_norm_.data(), R, D, hp_.rms_eps, last_.data());
  output_->forward(last_.data(), R, logits_.data());
  return logits_.data();
}

}  // namespace kvserve
