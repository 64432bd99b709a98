// The tests' one independent forward pass: deliberately naive, in double precision, for the
// architectures of ../shared/models (llama, with rope_freqs or not, qwen2, phi3, gemma2, gpt2,
// qwen3, gemma3, qwen3moe, gpt-oss, deepseek2), written from the models' published definitions: dense causal attention
// recomputed for the whole sequence, no cache, no kernels, no ArchSpec. DeepSeek-V2's latent
// attention is computed the way its paper writes it, every head's K and V expanded from the
// latent (not the absorbed form the engine runs). It reads weights
// straight from the GGUF file (F32, F16 or BF16) and shares no code with DecoderModel. GELU is
// the tanh form with its input and output rounded to half precision, as llama.cpp's CPU backend
// (the reference of these models) computes it. For the inspection tests it also reports each
// head's attention and zeroes chosen heads' outputs before the output projection.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "codecs/convert.h"
#include "gguf/gguf.h"

namespace kvserve::testing {

class ReferenceDecoder {
 public:
  int layers() const { return layers_; }
  int heads() const { return heads_; }

  // bf16_inputs: round every matrix product's input vector to BF16 first (round to nearest even),
  // as a model whose weights are held and multiplied in BF16 does; everything else stays float64.
  explicit ReferenceDecoder(const GgufFile& f, bool bf16_inputs = false)
      : f_(f), arch_(f.get("general.architecture").as_string("")), bf16_inputs_(bf16_inputs) {
    auto geti = [&](const std::string& k, int fallback) {
      return f.has(arch_ + "." + k) ? static_cast<int>(f.get(arch_ + "." + k).as_int(k)) : fallback;
    };
    auto getf = [&](const std::string& k, double fallback) {
      return f.has(arch_ + "." + k) ? f.get(arch_ + "." + k).as_float(k) : fallback;
    };
    d_ = geti("embedding_length", 0);
    layers_ = geti("block_count", 0);
    heads_ = geti("attention.head_count", 0);
    kv_heads_ = geti("attention.head_count_kv", heads_);
    ff_ = geti("feed_forward_length", 0);
    hd_ = geti("attention.key_length", d_ / heads_);
    rot_ = geti("rope.dimension_count", hd_);
    base_ = getf("rope.freq_base", 10000.0);
    eps_ = arch_ == "gpt2" ? getf("attention.layer_norm_epsilon", 1e-5) : getf("attention.layer_norm_rms_epsilon", 1e-5);
    window_ = geti("attention.sliding_window", 0);
    attn_cap_ = getf("attn_logit_softcapping", 0.0);
    final_cap_ = getf("final_logit_softcapping", 0.0);
    vocab_ = static_cast<int>(f.tensor("token_embd.weight").dims[1]);
    if (f.find_tensor("rope_freqs.weight")) freq_factors_ = w("rope_freqs.weight");
    base_local_ = getf("rope.freq_base_swa", 10000.0);
    if (f.has(arch_ + ".rope.scaling.factor")) linear_ = getf("rope.scaling.factor", 1.0);
    yarn_ = f.has(arch_ + ".rope.scaling.type") && f.get(arch_ + ".rope.scaling.type").as_string("") == "yarn";
    yarn_orig_ = getf("rope.scaling.original_context_length", 4096.0);
    period_ = geti("attention.sliding_window_pattern", 6);
    experts_ = geti("expert_count", 0);
    experts_used_ = geti("expert_used_count", 0);
    ff_expert_ = geti("expert_feed_forward_length", 0);
    shared_ = geti("expert_shared_count", 0);
    dense_lead_ = geti("leading_dense_block_count", 0);
    weights_scale_ = getf("expert_weights_scale", 1.0);
    if (arch_ == "deepseek2") {
      lora_ = geti("attention.kv_lora_rank", 0);
      nope_ = geti("attention.key_length_mla", 0) - rot_;
      vd_ = geti("attention.value_length_mla", 0);
      // DeepSeek's YaRN: the rotation keeps magnitude 1 and the scores carry mscale², mscale =
      // 1 + 0.1 · mscale_all_dim · ln(factor) (the file holds 0.1 x mscale_all_dim).
      const double mscale = 1.0 + 0.1 * (getf("rope.scaling.yarn_log_multiplier", 0.0) / 0.1) * std::log(linear_);
      kq_scale_ = mscale * mscale / std::sqrt(static_cast<double>(nope_ + rot_));
    }
  }

  // log p(tokens[t+1] | tokens[..t]) for t = 0..T-2.
  std::vector<double> logprobs(const std::vector<int32_t>& tokens) const {
    std::vector<double> out;
    const auto logits = forward(tokens);
    for (size_t t = 0; t + 1 < tokens.size(); ++t) out.push_back(logprob(logits[t], tokens[t + 1]));
    return out;
  }

  int vocab() const { return vocab_; }

  // What one run reports (the inspection tests' view).
  struct Run {
    std::vector<double> last_logits;
    std::vector<std::vector<double>> probs;  // [layer·heads + head] → [T·T] attention, row-major
    double prompt_logprob_sum = 0.0;         // Σ log p(tokens[t+1] | tokens[..t])
  };
  // ablate: (layer, head) pairs whose attention output is zeroed before the output projection.
  Run run(const std::vector<int32_t>& tokens, const std::vector<std::pair<int, int>>& ablate = {}) const {
    Run r;
    const auto logits = forward(tokens, &r.probs, ablate);
    for (size_t t = 0; t + 1 < tokens.size(); ++t) r.prompt_logprob_sum += logprob(logits[t], tokens[t + 1]);
    r.last_logits = logits.back();
    return r;
  }
  // Logits after the last token of `tokens`.
  std::vector<double> last_logits(const std::vector<int32_t>& tokens) const {
    return forward(tokens, nullptr, {}, /*last_only=*/true).back();
  }

  // Logits after every token. `probs`, when given, receives each head's attention probabilities:
  // (*probs)[layer * heads + head][t * T + u], zero where u is above the diagonal or outside a
  // window; `ablate` as run()'s; last_only: the last token's logits alone.
  std::vector<std::vector<double>> forward(const std::vector<int32_t>& tokens,
                                           std::vector<std::vector<double>>* probs = nullptr,
                                           const std::vector<std::pair<int, int>>& ablate = {},
                                           bool last_only = false) const {
    const bool ds = arch_ == "deepseek2";
    // Each head's key and value widths (DeepSeek: no-rotary + rotary, and its value width; its
    // K and V are expanded for every head).
    const int kd = ds ? nope_ + rot_ : hd_, vd = ds ? vd_ : hd_, kvh = ds ? heads_ : kv_heads_;
    const int T = static_cast<int>(tokens.size()), kvd = kv_heads_ * hd_, qd = heads_ * hd_;
    const bool gpt2 = arch_ == "gpt2", phi3 = arch_ == "phi3", gemma3 = arch_ == "gemma3";
    const bool gemma2 = arch_ == "gemma2" || gemma3;  // what Gemma 3 shares with Gemma 2
    const bool head_norms = gemma3 || arch_ == "qwen3" || arch_ == "qwen3moe";
    const bool neox = arch_ != "llama";
    const bool gptoss = arch_ == "gpt-oss";
    auto emb = w("token_embd.weight");
    std::vector<std::vector<double>> x(T, std::vector<double>(d_));
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < d_; ++i) {
        x[t][i] = emb[static_cast<size_t>(tokens[t]) * d_ + i];
        if (gemma2) x[t][i] *= std::sqrt(static_cast<float>(d_));
      }
    if (gpt2) {
      auto pos = w("position_embd.weight");
      for (int t = 0; t < T; ++t)
        for (int i = 0; i < d_; ++i) x[t][i] += pos[static_cast<size_t>(t) * d_ + i];
    }
    if (probs) probs->assign(static_cast<size_t>(layers_) * heads_, std::vector<double>(static_cast<size_t>(T) * T, 0.0));
    for (int l = 0; l < layers_; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      // Gemma 2 windows its even layers, Gemma 3 all but every period-th, phi3 every layer.
      const int window = phi3                ? window_
                         : gemma3            ? (l % period_ < period_ - 1 ? window_ : 0)
                         : gptoss            ? (l % 2 == 0 ? window_ : 0)
                         : gemma2 && l % 2 == 0 ? window_
                                             : 0;
      // Gemma 3's windowed layers rotate with their own base and no scaling, the others scaled.
      const double base = gemma3 && window > 0 ? base_local_ : base_;
      const double scale = gemma3 && window == 0 ? linear_ : 1.0;
      std::vector<std::vector<double>> q(T), k(T), v(T);
      for (int t = 0; t < T; ++t) {
        auto h = norm(x[t], p + "attn_norm");
        if (ds) {
          latent_qkv(p, h, t, base, q[t], k[t], v[t]);
          continue;
        }
        if (gpt2 || phi3) {
          auto qkv = linear(p + "attn_qkv", h, qd + 2 * kvd);
          q[t].assign(qkv.begin(), qkv.begin() + qd);
          k[t].assign(qkv.begin() + qd, qkv.begin() + qd + kvd);
          v[t].assign(qkv.begin() + qd + kvd, qkv.end());
        } else {
          q[t] = linear(p + "attn_q", h, qd);
          k[t] = linear(p + "attn_k", h, kvd);
          v[t] = linear(p + "attn_v", h, kvd);
        }
        if (head_norms) {
          head_norm(q[t], p + "attn_q_norm");
          head_norm(k[t], p + "attn_k_norm");
        }
        if (!gpt2) {
          rope(q[t], t, heads_, neox, base, scale);
          rope(k[t], t, kv_heads_, neox, base, scale);
        }
      }
      for (int t = 0; t < T; ++t) {
        std::vector<double> att(static_cast<size_t>(heads_) * vd, 0.0);
        const int first = window > 0 ? std::max(0, t - window + 1) : 0;
        for (int h = 0; h < heads_; ++h) {
          const int kh = h / (heads_ / kvh);
          std::vector<double> s(t + 1, 0.0);
          double mx = -1e300;
          for (int u = first; u <= t; ++u) {
            double dot = 0;
            for (int i = 0; i < kd; ++i) dot += q[t][h * kd + i] * k[u][kh * kd + i];
            s[u] = ds ? dot * kq_scale_ : dot / std::sqrt(static_cast<double>(hd_));
            if (attn_cap_ > 0) s[u] = attn_cap_ * std::tanh(s[u] / attn_cap_);
            mx = std::max(mx, s[u]);
          }
          // gpt-oss: the head's sink logit joins the denominator.
          const double sink = gptoss ? w(p + "attn_sinks.weight")[h] : -INFINITY;
          mx = std::max(mx, sink);
          double sum = gptoss ? std::exp(sink - mx) : 0.0;
          for (int u = first; u <= t; ++u) sum += (s[u] = std::exp(s[u] - mx));
          if (probs)
            for (int u = first; u <= t; ++u) (*probs)[static_cast<size_t>(l) * heads_ + h][static_cast<size_t>(t) * T + u] = s[u] / sum;
          if (std::find(ablate.begin(), ablate.end(), std::make_pair(l, h)) != ablate.end()) continue;
          for (int u = first; u <= t; ++u)
            for (int i = 0; i < vd; ++i) att[h * vd + i] += s[u] / sum * v[u][kh * vd + i];
        }
        auto o = linear(p + "attn_output", att, d_);
        if (gemma2) o = norm(o, p + "post_attention_norm");
        for (int i = 0; i < d_; ++i) x[t][i] += o[i];
        auto h2 = norm(x[t], p + (gptoss ? "post_attention_norm" : "ffn_norm"));
        if (experts_ > 0 && l >= dense_lead_) {
          const auto y = mixture(p, h2);
          for (int i = 0; i < d_; ++i) x[t][i] += y[i];
          continue;
        }
        std::vector<double> act(ff_);
        if (gpt2) {
          auto up = linear(p + "ffn_up", h2, ff_);
          for (int i = 0; i < ff_; ++i) act[i] = gelu(up[i]);
        } else {
          std::vector<double> gate, up;
          if (phi3) {
            auto gu = linear(p + "ffn_up", h2, 2 * ff_);
            gate.assign(gu.begin(), gu.begin() + ff_);
            up.assign(gu.begin() + ff_, gu.end());
          } else {
            gate = linear(p + "ffn_gate", h2, ff_);
            up = linear(p + "ffn_up", h2, ff_);
          }
          for (int i = 0; i < ff_; ++i)
            act[i] = (gemma2 ? gelu(gate[i]) : gate[i] / (1.0 + std::exp(-gate[i]))) * up[i];
        }
        auto dn = linear(p + "ffn_down", act, d_);
        if (gemma2) dn = norm(dn, p + "post_ffw_norm");
        for (int i = 0; i < d_; ++i) x[t][i] += dn[i];
      }
    }
    const std::string out_name = f_.find_tensor("output.weight") ? "output" : "token_embd";
    std::vector<std::vector<double>> logits;
    for (int t = last_only ? T - 1 : 0; t < T; ++t) {
      auto z = linear(out_name, norm(x[t], "output_norm"), vocab_);
      if (final_cap_ > 0)
        for (double& e : z) e = final_cap_ * std::tanh(e / final_cap_);
      logits.push_back(std::move(z));
    }
    return logits;
  }

 private:
  static double logprob(const std::vector<double>& logits, int32_t token) {
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (double z : logits) sum += std::exp(z - mx);
    return logits[token] - mx - std::log(sum);
  }
  std::vector<double> w(const std::string& name) const {
    const GgufTensorInfo& t = f_.tensor(name);
    EXPECT_TRUE(t.type == TensorType::kF32 || t.type == TensorType::kF16 || t.type == TensorType::kBF16) << name;
    std::vector<double> out(t.n_elements());
    const void* p = f_.tensor_data(t);
    for (size_t i = 0; i < out.size(); ++i) {
      if (t.type == TensorType::kF32) out[i] = static_cast<const float*>(p)[i];
      else if (t.type == TensorType::kF16) out[i] = fp16_to_fp32(static_cast<const uint16_t*>(p)[i]);
      else out[i] = bf16_to_fp32(static_cast<const uint16_t*>(p)[i]);
    }
    return out;
  }
  // W·x (+ bias where the file has one); W of `name`.weight is [rows, x.size()].
  std::vector<double> linear(const std::string& name, std::vector<double> x, int rows) const {
    if (bf16_inputs_)
      for (double& e : x) e = bf16_to_fp32(fp32_to_bf16(static_cast<float>(e)));
    const auto m = w(name + ".weight");
    const int cols = static_cast<int>(x.size());
    std::vector<double> y(rows, 0.0);
    if (f_.find_tensor(name + ".bias")) y = w(name + ".bias");
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) y[r] += m[static_cast<size_t>(r) * cols + c] * x[c];
    return y;
  }
  // RMSNorm, or (gpt2) LayerNorm with its bias.
  std::vector<double> norm(const std::vector<double>& x, const std::string& name) const {
    const auto g = w(name + ".weight");
    const double n = static_cast<double>(x.size());
    double mean = 0, ss = 0;
    if (arch_ == "gpt2")
      for (double e : x) mean += e / n;
    for (double e : x) ss += (e - mean) * (e - mean);
    const double inv = 1.0 / std::sqrt(ss / n + eps_);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) * inv * g[i];
    if (arch_ == "gpt2") {
      const auto b = w(name + ".bias");
      for (size_t i = 0; i < y.size(); ++i) y[i] += b[i];
    }
    return y;
  }
  // RMSNorm of each head_dim-wide head of v with the one weight vector `name`.weight.
  void head_norm(std::vector<double>& v, const std::string& name) const {
    const auto g = w(name + ".weight");
    for (size_t h = 0; h * hd_ < v.size(); ++h) {
      double ss = 0;
      for (int i = 0; i < hd_; ++i) ss += v[h * hd_ + i] * v[h * hd_ + i];
      const double inv = 1.0 / std::sqrt(ss / hd_ + eps_);
      for (int i = 0; i < hd_; ++i) v[h * hd_ + i] *= inv * g[i];
    }
  }
  // YaRN (gpt-oss): pair i's angle moves from the interpolated one (position / factor) to the
  // original by a ramp between the pairs that turn 32 and 1 times over the original context,
  // and cos and sin grow by 1 + 0.1·ln(factor).
  // stride, offset: where each head's rotary dims begin (default: heads of hd_, from their start).
  void rope(std::vector<double>& v, int pos, int nh, bool neox, double base, double linear, int stride = 0,
            int offset = 0) const {
    if (stride == 0) stride = hd_;
    double magnitude = 1.0, lo = 0.0, hi = 0.0;
    if (yarn_) {
      const auto corr = [&](double turns) {
        return rot_ * std::log(yarn_orig_ / (turns * 2 * M_PI)) / (2 * std::log(base));
      };
      lo = std::max(0.0, std::floor(corr(32.0)));
      hi = std::min(rot_ - 1.0, std::ceil(corr(1.0)));
      magnitude = arch_ == "deepseek2" ? 1.0 : 1.0 + 0.1 * std::log(linear_);
    }
    for (int h = 0; h < nh; ++h)
      for (int i = 0; i < rot_ / 2; ++i) {
        double th = pos / linear * std::pow(base, -2.0 * i / rot_);
        if (yarn_) {
          const double original = pos * std::pow(base, -2.0 * i / rot_), ramp = 1.0 - std::clamp((i - lo) / std::max(0.001, hi - lo), 0.0, 1.0);
          th = original / linear_ * (1.0 - ramp) + original * ramp;
        }
        if (!freq_factors_.empty()) th /= freq_factors_[i];
        const int ia = h * stride + offset + (neox ? i : 2 * i), ib = h * stride + offset + (neox ? i + rot_ / 2 : 2 * i + 1);
        const double a = v[ia], b = v[ib];
        v[ia] = (a * std::cos(th) - b * std::sin(th)) * magnitude;
        v[ib] = (a * std::sin(th) + b * std::cos(th)) * magnitude;
      }
  }
  // A mixture of experts. Qwen3-MoE: p = softmax of the router's logits, the experts_used_
  // largest chosen (the lower index first on a tie), their p renormalised to sum 1, and the
  // weighted sum of each chosen expert's SwiGLU. gpt-oss: the largest biased logits chosen,
  // weights a softmax over those alone, each expert with biases and the clamped SwiGLU
  // x·sigmoid(1.702x)·(y + 1), x = min(gate, 7), y = clamp(up, -7, 7).
  std::vector<double> mixture(const std::string& p, const std::vector<double>& h) const {
    const bool gptoss = arch_ == "gpt-oss", ds = arch_ == "deepseek2";
    const auto logits = linear(p + "ffn_gate_inp", h, experts_);
    std::vector<double> score = logits;
    if (!gptoss) {
      const double mx = *std::max_element(logits.begin(), logits.end());
      double sum = 0;
      for (double& z : score) sum += (z = std::exp(z - mx));
      for (double& z : score) z /= sum;
    }
    std::vector<int> order(experts_);
    for (int e = 0; e < experts_; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return score[a] > score[b]; });
    std::vector<double> weight(experts_used_);
    double total = 0;
    for (int j = 0; j < experts_used_; ++j)
      total += (weight[j] = gptoss ? std::exp(score[order[j]] - score[order[0]]) : score[order[j]]);
    for (double& wj : weight) wj = ds ? wj * weights_scale_ : wj / total;  // DeepSeek-V2: scaled, not renormalised
    std::vector<double> y(d_, 0.0);
    if (shared_ > 0) {  // the shared experts' SwiGLU, on every token
      const int sh = shared_ * ff_expert_;
      const auto gate = linear(p + "ffn_gate_shexp", h, sh), up = linear(p + "ffn_up_shexp", h, sh);
      std::vector<double> act(sh);
      for (int i = 0; i < sh; ++i) act[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      y = linear(p + "ffn_down_shexp", act, d_);
    }
    for (int j = 0; j < experts_used_; ++j) {
      const int e = order[j];
      auto gate = expert_linear(p + "ffn_gate_exps", e, h, ff_expert_);
      auto up = expert_linear(p + "ffn_up_exps", e, h, ff_expert_);
      std::vector<double> act(ff_expert_);
      for (int i = 0; i < ff_expert_; ++i) {
        if (gptoss) {
          const double g = std::min(gate[i], 7.0), u = std::clamp(up[i], -7.0, 7.0);
          act[i] = g / (1.0 + std::exp(-1.702 * g)) * (u + 1.0);
        } else {
          act[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
        }
      }
      const auto down = expert_linear(p + "ffn_down_exps", e, act, d_);
      for (int i = 0; i < d_; ++i) y[i] += weight[j] * down[i];
    }
    return y;
  }
  // Expert e's matrix of the stacked `name`.weight ([cols, rows, experts] in ggml order) times x.
  // Plus expert e's row of `name`.bias ([rows, experts]) where the file has one.
  std::vector<double> expert_linear(const std::string& name, int e, const std::vector<double>& x, int rows) const {
    const auto m = w(name + ".weight");
    const size_t cols = x.size(), at = static_cast<size_t>(e) * rows * cols;
    std::vector<double> y(rows, 0.0);
    if (f_.find_tensor(name + ".bias")) {
      const auto b = w(name + ".bias");
      std::copy(b.begin() + static_cast<size_t>(e) * rows, b.begin() + static_cast<size_t>(e + 1) * rows, y.begin());
    }
    for (int r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) y[r] += m[at + r * cols + c] * x[c];
    return y;
  }
  // DeepSeek-V2's attention inputs for token t: q (each head's no-rotary then rotated dims), and
  // each head's K (its up-projected latent, then the shared rotated key) and V.
  void latent_qkv(const std::string& p, const std::vector<double>& h, int t, double base, std::vector<double>& q,
                  std::vector<double>& k, std::vector<double>& v) const {
    const int kd = nope_ + rot_;
    q = linear(p + "attn_q", h, heads_ * kd);
    rope(q, t, heads_, false, base, 1.0, kd, nope_);
    auto kva = linear(p + "attn_kv_a_mqa", h, lora_ + rot_);
    std::vector<double> kr(kva.begin() + lora_, kva.end());
    rope(kr, t, 1, false, base, 1.0, rot_, 0);
    const auto c = norm(std::vector<double>(kva.begin(), kva.begin() + lora_), p + "attn_kv_a_norm");
    const auto kb = w(p + "attn_k_b.weight"), vb = w(p + "attn_v_b.weight");  // [h][lora][nope], [h][vd][lora]
    k.assign(static_cast<size_t>(heads_) * kd, 0.0);
    v.assign(static_cast<size_t>(heads_) * vd_, 0.0);
    for (int hd = 0; hd < heads_; ++hd) {
      for (int d = 0; d < nope_; ++d)
        for (int r = 0; r < lora_; ++r) k[hd * kd + d] += c[r] * kb[(static_cast<size_t>(hd) * lora_ + r) * nope_ + d];
      for (int d = 0; d < rot_; ++d) k[hd * kd + nope_ + d] = kr[d];
      for (int e = 0; e < vd_; ++e)
        for (int r = 0; r < lora_; ++r) v[hd * vd_ + e] += c[r] * vb[(static_cast<size_t>(hd) * vd_ + e) * lora_ + r];
    }
  }
  static double gelu(double x) {
    if (x <= -10.0) return 0.0;
    if (x >= 10.0) return x;
    const double h = static_cast<double>(static_cast<_Float16>(static_cast<float>(x)));
    const double y = 0.5 * h * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * h * (1.0 + 0.044715 * h * h)));
    return static_cast<double>(static_cast<_Float16>(static_cast<float>(y)));
  }

  const GgufFile& f_;
  std::string arch_;
  bool bf16_inputs_ = false;
  int d_, layers_, heads_, kv_heads_, ff_, hd_, rot_, vocab_, window_;
  double base_, eps_, attn_cap_, final_cap_, base_local_ = 10000.0, linear_ = 1.0;
  int period_ = 6;
  int experts_ = 0, experts_used_ = 0, ff_expert_ = 0, shared_ = 0, dense_lead_ = 0;
  double weights_scale_ = 1.0, kq_scale_ = 1.0;
  int lora_ = 0, nope_ = 0, vd_ = 0;
  bool yarn_ = false;
  double yarn_orig_ = 4096.0;
  std::vector<double> freq_factors_;
};

}  // namespace kvserve::testing
