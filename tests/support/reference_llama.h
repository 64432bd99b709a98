// An independent, deliberately naive Llama forward pass in double precision: dense causal
// attention recomputed from scratch for the whole sequence, no cache, no oneDNN, no blocks.
// It reads weights straight from the GGUF file and shares no code with DecoderModel.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "codecs/convert.h"

namespace kvserve::testing {

class ReferenceLlama {
 public:
  // bf16_inputs: round every matrix product's input vector to BF16 first (round to nearest even),
  // as a model whose weights are held and multiplied in BF16 does; everything else stays float64.
  explicit ReferenceLlama(const GgufFile& f, bool bf16_inputs = false) : f_(f), bf16_inputs_(bf16_inputs) {
    auto geti = [&](const char* k) { return static_cast<int>(f.get(k).as_int(k)); };
    d_ = geti("llama.embedding_length");
    layers_ = geti("llama.block_count");
    heads_ = geti("llama.attention.head_count");
    kv_heads_ = f.has("llama.attention.head_count_kv") ? geti("llama.attention.head_count_kv") : heads_;
    ff_ = geti("llama.feed_forward_length");
    hd_ = d_ / heads_;
    rot_ = f.has("llama.rope.dimension_count") ? geti("llama.rope.dimension_count") : hd_;
    base_ = f.has("llama.rope.freq_base") ? f.get("llama.rope.freq_base").as_float("") : 10000.0;
    eps_ = f.has("llama.attention.layer_norm_rms_epsilon")
               ? f.get("llama.attention.layer_norm_rms_epsilon").as_float("")
               : 1e-5;
    vocab_ = static_cast<int>(f.tensor("token_embd.weight").dims[1]);
  }

  // What one run can report besides the last logits (for the inspection tests).
  struct Run {
    std::vector<double> last_logits;
    std::vector<std::vector<double>> probs;  // [layer·heads + head] → [T·T] attention, row-major
    double prompt_logprob_sum = 0.0;         // Σ log p(tokens[t+1] | tokens[..t]), if asked for
  };

  // Logits after the last token of `tokens`.
  std::vector<double> last_logits(const std::vector<int32_t>& tokens) const { return run(tokens).last_logits; }

  // ablate: (layer, head) pairs whose attention output is zeroed before the output projection.
  Run run(const std::vector<int32_t>& tokens, const std::vector<std::pair<int, int>>& ablate = {},
          bool score = false) const {
    Run result;
    result.probs.assign(static_cast<size_t>(layers_) * heads_, std::vector<double>(tokens.size() * tokens.size(), 0.0));
    const int T = static_cast<int>(tokens.size());
    auto emb = w("token_embd.weight");
    std::vector<std::vector<double>> x(T, std::vector<double>(d_));
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < d_; ++i) x[t][i] = emb[static_cast<size_t>(tokens[t]) * d_ + i];
    for (int l = 0; l < layers_; ++l) {
      const std::string p = "blk." + std::to_string(l) + ".";
      auto wq = w(p + "attn_q.weight"), wk = w(p + "attn_k.weight"), wv = w(p + "attn_v.weight");
      auto wo = w(p + "attn_output.weight"), an = w(p + "attn_norm.weight"), fn = w(p + "ffn_norm.weight");
      auto wg = w(p + "ffn_gate.weight"), wu = w(p + "ffn_up.weight"), wd = w(p + "ffn_down.weight");
      const int kvd = kv_heads_ * hd_;
      std::vector<std::vector<double>> q(T), k(T), v(T);
      for (int t = 0; t < T; ++t) {
        auto h = norm(x[t], an);
        q[t] = matvec(wq, h, d_, d_);
        k[t] = matvec(wk, h, kvd, d_);
        v[t] = matvec(wv, h, kvd, d_);
        rope(q[t], t, heads_);
        rope(k[t], t, kv_heads_);
      }
      for (int t = 0; t < T; ++t) {
        std::vector<double> att(d_, 0.0);
        for (int h = 0; h < heads_; ++h) {
          const int kh = h / (heads_ / kv_heads_);
          std::vector<double> s(t + 1);
          double mx = -1e300;
          for (int u = 0; u <= t; ++u) {
            double dot = 0;
            for (int i = 0; i < hd_; ++i) dot += q[t][h * hd_ + i] * k[u][kh * hd_ + i];
            s[u] = dot / std::sqrt(static_cast<double>(hd_));
            mx = std::max(mx, s[u]);
          }
          double sum = 0;
          for (auto& e : s) sum += (e = std::exp(e - mx));
          for (int u = 0; u <= t; ++u) result.probs[static_cast<size_t>(l) * heads_ + h][t * T + u] = s[u] / sum;
          if (std::find(ablate.begin(), ablate.end(), std::make_pair(l, h)) != ablate.end()) continue;
          for (int u = 0; u <= t; ++u)
            for (int i = 0; i < hd_; ++i) att[h * hd_ + i] += s[u] / sum * v[u][kh * hd_ + i];
        }
        auto o = matvec(wo, att, d_, d_);
        for (int i = 0; i < d_; ++i) x[t][i] += o[i];
        auto h2 = norm(x[t], fn);
        auto g = matvec(wg, h2, ff_, d_), up = matvec(wu, h2, ff_, d_);
        for (int i = 0; i < ff_; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * up[i];
        auto dn = matvec(wd, g, d_, ff_);
        for (int i = 0; i < d_; ++i) x[t][i] += dn[i];
      }
    }
    auto out = f_.find_tensor("output.weight") ? w("output.weight") : w("token_embd.weight");
    const auto out_norm = w("output_norm.weight");
    for (int t = score ? 0 : T - 1; t < T; ++t) {
      auto logits = matvec(out, norm(x[t], out_norm), vocab_, d_);
      if (t + 1 < T) {
        const double mx = *std::max_element(logits.begin(), logits.end());
        double sum = 0;
        for (double z : logits) sum += std::exp(z - mx);
        result.prompt_logprob_sum += logits[tokens[t + 1]] - mx - std::log(sum);
      } else {
        result.last_logits = std::move(logits);
      }
    }
    return result;
  }

  int vocab() const { return vocab_; }

 private:
  std::vector<double> w(const std::string& name) const {
    const GgufTensorInfo& t = f_.tensor(name);
    std::vector<double> out(t.n_elements());
    const void* p = f_.tensor_data(t);
    for (size_t i = 0; i < out.size(); ++i) {
      if (t.type == TensorType::kF32) out[i] = static_cast<const float*>(p)[i];
      else if (t.type == TensorType::kF16) out[i] = fp16_to_fp32(static_cast<const uint16_t*>(p)[i]);
      else out[i] = bf16_to_fp32(static_cast<const uint16_t*>(p)[i]);
    }
    return out;
  }
  std::vector<double> matvec(const std::vector<double>& m, std::vector<double> x, int rows, int cols) const {
    if (bf16_inputs_)
      for (double& e : x) e = bf16_to_fp32(fp32_to_bf16(static_cast<float>(e)));
    std::vector<double> y(rows, 0.0);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < cols; ++c) y[r] += m[static_cast<size_t>(r) * cols + c] * x[c];
    return y;
  }
  std::vector<double> norm(const std::vector<double>& x, const std::vector<double>& g) const {
    double ss = 0;
    for (double e : x) ss += e * e;
    double inv = 1.0 / std::sqrt(ss / x.size() + eps_);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * g[i];
    return y;
  }
  void rope(std::vector<double>& v, int pos, int nh) const {
    for (int h = 0; h < nh; ++h)
      for (int i = 0; i < rot_; i += 2) {
        double th = pos * std::pow(base_, -static_cast<double>(i) / rot_);
        double a = v[h * hd_ + i], b = v[h * hd_ + i + 1];
        v[h * hd_ + i] = a * std::cos(th) - b * std::sin(th);
        v[h * hd_ + i + 1] = a * std::sin(th) + b * std::cos(th);
      }
  }

  const GgufFile& f_;
  bool bf16_inputs_;
  int d_, layers_, heads_, kv_heads_, ff_, hd_, rot_, vocab_;
  double base_, eps_;
};

}  // namespace kvserve::testing
