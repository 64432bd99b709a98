#include "model/synthetic_copier.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/splitmix.h"
#include "model/synthetic.h"

namespace kvserve {
namespace {

// Scores in nats that the design holds between what a head should attend to and the runner-up:
// wide enough that 4-bit rounding of the weights and the noise leave every choice alone.
constexpr double kPositionMargin = 40.0;  // the previous token against any other position
// Layer 1 scores a match of the current token, the one before and the one before that with
// 4, 2 and 1 units: a longer match of the tokens just written wins over a shorter one.
constexpr double kMatchUnitNats = 25.0;
constexpr int kMatchWeights[3] = {4, 2, 1};
constexpr double kOutputScale = 40.0;     // logit of a code against itself (others: about +-0.4 of it)
constexpr double kFastTheta = 0.01;       // rotary pairs turning at least this per position locate tokens
constexpr double kSlowTurn = 0.01;        // pairs turning at most this over the context match content

// Where each slot lives in the residual stream, and the rotary pairs each kind of head uses.
struct Layout {
  int64_t d = 0, hd = 0, heads = 0, kv_group = 1;
  int64_t kc = 0, uc = 0;  // widths of the matching and output codes
  int64_t bias = 0, k = 1, u = 0, p[3] = {0, 0, 0}, c = 0;  // p[n]: the k code of the token n + 1 back
  int64_t fast_pairs = 0, slow_first = 0;  // pairs [0, fast_pairs) and [slow_first, hd / 2)
  double n0 = 1, n1 = 1, n2 = 1;  // RMS-norm gains at layer 0, layer 1 and the classifier
  double pos_amp = 0;             // per-pair amplitude of the positional queries and keys
  std::vector<double> theta;      // per pair

  explicit Layout(const SyntheticSpec& s) {
    d = s.dim;
    heads = s.heads;
    hd = s.head_dim ? s.head_dim : s.dim / s.heads;
    kv_group = s.heads / s.kv_heads;
    for (int64_t i = 0; i < hd / 2; ++i) theta.push_back(std::pow(double(kCopierRopeBase), -2.0 * double(i) / double(hd)));
    while (fast_pairs < hd / 2 && theta[fast_pairs] >= kFastTheta) ++fast_pairs;
    slow_first = hd / 2;
    while (slow_first > 0 && theta[slow_first - 1] * s.context <= kSlowTurn) --slow_first;
    kc = 2 * (hd / 2 - slow_first) / 3;
    uc = hd;
    u = k + kc;
    p[0] = u + uc;
    p[1] = p[0] + kc;
    p[2] = p[1] + kc;
    c = p[2] + kc;
    // Every slot holds a unit vector (the bias dimension 1), so the norms are fixed by the layer.
    n0 = std::sqrt(double(d) / 3.0);
    n1 = std::sqrt(double(d) / 6.0);
    n2 = std::sqrt(double(d) / 7.0);
    // The positional score sum_i cos(j theta_i) peaks at j = 0; its smallest drop at another
    // offset within the context sets the amplitude that makes the drop kPositionMargin nats.
    double least = 1e30;
    for (int64_t j = 1; j <= s.context; ++j) {
      double drop = 0;
      for (int64_t i = 0; i < fast_pairs; ++i) drop += 1.0 - std::cos(double(j) * theta[i]);
      least = std::min(least, drop);
    }
    pos_amp = std::sqrt(kPositionMargin * std::sqrt(double(hd)) / std::max(least, 1e-9));
  }
  int64_t width() const { return c + uc; }
};

// A random unit vector of `width` for token t (Box-Muller on splitmix: the same anywhere).
std::vector<double> code(uint64_t seed, int64_t t, uint64_t salt, int64_t width) {
  SplitMix64 rng{seed * 0x100000001B3ull + static_cast<uint64_t>(t) * 4 + salt};
  std::vector<double> v(width);
  double norm = 0;
  for (double& x : v) {
    x = std::sqrt(-2.0 * std::log(rng.unit())) * std::cos(6.283185307179586 * rng.unit());
    norm += x * x;
  }
  for (double& x : v) x /= std::sqrt(norm);
  return v;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

void validate_copier(const SyntheticSpec& s) {
  if (s.arch != "llama") throw std::invalid_argument("copier: arch must be llama");
  if (s.tied_output) throw std::invalid_argument("copier: the classifier must not be tied to the embedding");
  if (s.layers < 2 || s.heads < 3) throw std::invalid_argument("copier: needs at least 2 layers and 3 heads");
  const Layout l(s);
  if (l.kc < 32)
    throw std::invalid_argument("copier: head-dim " + std::to_string(l.hd) + " leaves " + std::to_string(l.kc) +
                                " dims for each matched token at context " + std::to_string(s.context) +
                                " (at least 32 needed)");
  if (l.fast_pairs < 2) throw std::invalid_argument("copier: head-dim too small for the positional heads");
  if (l.width() > s.dim)
    throw std::invalid_argument("copier: dim must be at least " + std::to_string(l.width()) + " for head-dim " +
                                std::to_string(l.hd));
}

void copier_weights(const SyntheticSpec& s, const std::string& name, const std::vector<uint64_t>& dims,
                    std::vector<float>& w) {
  const Layout l(s);
  const int64_t d = l.d, hd = l.hd, qd = l.heads * hd;
  auto set = [&](int64_t row, int64_t col, int64_t cols, double v) { w[row * cols + col] = static_cast<float>(v); };
  if (name == "token_embd.weight" || name == "output.weight") {
    const bool embd = name == "token_embd.weight";
    for (int64_t t = 0; t < static_cast<int64_t>(dims[1]); ++t) {
      const std::vector<double> ku = code(s.seed, t, 1, l.uc);
      if (embd) {
        const std::vector<double> kk = code(s.seed, t, 0, l.kc);
        set(t, l.bias, d, 1.0);
        for (int64_t r = 0; r < l.kc; ++r) set(t, l.k + r, d, kk[r]);
        for (int64_t r = 0; r < l.uc; ++r) set(t, l.u + r, d, ku[r]);
      } else {
        for (int64_t r = 0; r < l.uc; ++r) set(t, l.c + r, d, kOutputScale * ku[r] / l.n2);
      }
    }
    return;
  }
  const int layer = name.rfind("blk.0.", 0) == 0 ? 0 : name.rfind("blk.1.", 0) == 0 ? 1 : -1;
  if (layer < 0) return;
  if (layer == 0) {
    // Heads 0, 1 and 2 look 1, 2 and 3 tokens back: constant keys (a, 0) in each fast pair,
    // queries turned back by delta * theta, so q.R((n - m) theta)k peaks at n = m - delta.
    for (int h = 0; h < 3; ++h) {
      const int64_t kvh = h / l.kv_group, delta = h + 1;
      for (int64_t i = 0; i < l.fast_pairs; ++i) {
        if (ends_with(name, "attn_q.weight")) {
          set(h * hd + 2 * i, l.bias, d, l.pos_amp * std::cos(double(delta) * l.theta[i]) / l.n0);
          set(h * hd + 2 * i + 1, l.bias, d, -l.pos_amp * std::sin(double(delta) * l.theta[i]) / l.n0);
        } else if (ends_with(name, "attn_k.weight")) {
          set(kvh * hd + 2 * i, l.bias, d, l.pos_amp / l.n0);
        }
      }
      for (int64_t r = 0; r < l.kc; ++r) {
        if (ends_with(name, "attn_v.weight")) set(kvh * hd + r, l.k + r, d, 1.0 / l.n0);
        if (ends_with(name, "attn_output.weight")) set(l.p[h] + r, h * hd + r, qd, 1.0);
      }
    }
    return;
  }
  // Layer 1, head 0: (k_t, P1_t, P2_t) against (P1_j, P2_j, P3_j) in the slow pairs, copying
  // u_j into C.
  const int64_t q0 = 2 * l.slow_first;
  for (int part = 0; part < 3; ++part) {
    const double b = std::sqrt(kMatchWeights[part] * kMatchUnitNats * std::sqrt(double(hd)));
    const int64_t query_slot = part == 0 ? l.k : l.p[part - 1];
    for (int64_t r = 0; r < l.kc; ++r) {
      if (ends_with(name, "attn_q.weight")) set(q0 + part * l.kc + r, query_slot + r, d, b / l.n1);
      if (ends_with(name, "attn_k.weight")) set(q0 + part * l.kc + r, l.p[part] + r, d, b / l.n1);
    }
  }
  for (int64_t r = 0; r < l.uc; ++r) {
    if (ends_with(name, "attn_v.weight")) set(r, l.u + r, d, 1.0 / l.n1);
    if (ends_with(name, "attn_output.weight")) set(l.c + r, r, qd, 1.0);
  }
}

int32_t copier_next_token(const std::vector<int32_t>& t) {
  if (t.empty()) return -1;
  const int64_t i = static_cast<int64_t>(t.size()) - 1;
  // The first positions see the first token where none lies that far back.
  auto back = [&](int64_t j, int64_t n) { return t[std::max<int64_t>(j - n, 0)]; };
  int best = 0;
  std::vector<int32_t> followers;
  for (int64_t j = 0; j <= i; ++j) {
    int score = 0;
    for (int n = 0; n < 3; ++n) score += kMatchWeights[n] * (back(j, n + 1) == back(i, n));
    if (score > best) {
      best = score;
      followers.clear();
    }
    if (score == best && best > 0) followers.push_back(t[j]);
  }
  if (best < kMatchWeights[0]) return -1;  // the last token never occurred before
  for (int32_t f : followers)
    if (f != followers.front()) return -1;  // the head averages several codes: no single answer
  return followers.front();
}

}  // namespace kvserve
