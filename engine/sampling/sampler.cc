#include "sampling/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <unordered_map>

namespace kvserve {
namespace {

// After penalties: NaN can never be chosen (-inf), and an overflow to +inf (a positive logit
// divided by a tiny repetition penalty) becomes the largest float, so every difference taken
// later is a number. Returns the first index of the largest logit, found in the same pass, or
// -1 when no logit is a number above -inf.
int32_t sanitize(float* logits, int32_t vocab) {
  int32_t best = -1;
  float mx = -INFINITY;
  for (int32_t i = 0; i < vocab; ++i) {
    float& l = logits[i];
    if (std::isnan(l)) l = -INFINITY;
    else if (l > FLT_MAX) l = FLT_MAX;
    if (l > mx) {
      mx = l;
      best = i;
    }
  }
  return best;
}

}  // namespace

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

void Sampler::apply_penalties(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                              std::span<const int32_t> generated) const {
  if (p_.repetition_penalty != 1.0f) {
    std::vector<bool> seen(vocab, false);
    for (int32_t t : context) {
      if (t < 0 || t >= vocab || seen[t]) continue;
      seen[t] = true;
      logits[t] = logits[t] > 0 ? logits[t] / p_.repetition_penalty : logits[t] * p_.repetition_penalty;
    }
  }
  if (p_.presence_penalty != 0.0f || p_.frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int> counts;
    for (int32_t t : generated) ++counts[t];
    for (auto [t, n] : counts) {
      if (t < 0 || t >= vocab) continue;
      logits[t] -= p_.presence_penalty + p_.frequency_penalty * static_cast<float>(n);
    }
  }
}

std::vector<float> Sampler::distribution(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                                         std::span<const int32_t> generated) {
  apply_penalties(logits, vocab, context, generated);
  std::vector<float> probs(vocab, 0.0f);
  cand_.clear();
  const int32_t best = sanitize(logits, vocab);
  if (best < 0) return probs;  // nothing can be sampled
  if (p_.temperature < kGreedyBelowTemperature) {
    probs[best] = 1.0f;
    return probs;
  }
  // Candidates sorted by logit, best first (ties: lower id first, so results are deterministic).
  for (int32_t i = 0; i < vocab; ++i) cand_.emplace_back(logits[i], i);
  auto better = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t n = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), better);
    n = p_.top_k;
  } else {
    std::sort(cand_.begin(), cand_.end(), better);
  }
  // In double: logits near the float limits, or divided by a small temperature, stay finite.
  const double mx = cand_[0].first;
  const double inv_t = 1.0 / static_cast<double>(p_.temperature);
  std::vector<double> w(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += (w[i] = std::exp((static_cast<double>(cand_[i].first) - mx) * inv_t));
  // top-p: the smallest prefix whose mass reaches top_p (at least one token).
  if (p_.top_p < 1.0f) {
    double acc = 0;
    size_t keep = n;
    for (size_t i = 0; i < n; ++i) {
      acc += w[i] / sum;
      if (acc >= p_.top_p) {
        keep = i + 1;
        break;
      }
    }
    n = keep;
  }
  // min-p: relative to the most likely token.
  if (p_.min_p > 0.0f) {
    size_t keep = 1;
    while (keep < n && w[keep] >= p_.min_p * w[0]) ++keep;
    n = keep;
  }
  sum = 0;
  for (size_t i = 0; i < n; ++i) sum += w[i];
  for (size_t i = 0; i < n; ++i) probs[cand_[i].second] = static_cast<float>(w[i] / sum);
  return probs;
}

int32_t Sampler::sample(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                        std::span<const int32_t> generated) {
  if (p_.temperature < kGreedyBelowTemperature) {
    apply_penalties(logits, vocab, context, generated);
    return sanitize(logits, vocab);
  }
  std::vector<float> probs = distribution(logits, vocab, context, generated);
  if (cand_.empty()) return -1;
  // Walk the kept candidates (in cand_ order) so the draw does not depend on vocab order.
  const double u = uniform();
  double acc = 0;
  int32_t last = cand_[0].second;
  for (const auto& c : cand_) {
    const float pr = probs[c.second];
    if (pr <= 0.0f) continue;
    last = c.second;
    acc += pr;
    if (u < acc) return c.second;
  }
  return last;
}

LogSoftmax::LogSoftmax(const float* raw, int32_t vocab) {
  double mx = -INFINITY;
  for (int32_t i = 0; i < vocab; ++i)
    if (std::isfinite(raw[i])) mx = std::max(mx, static_cast<double>(raw[i]));
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i)
    if (std::isfinite(raw[i])) sum += std::exp(static_cast<double>(raw[i]) - mx);
  // Subtracting the maximum first keeps the digits of huge logits.
  max_ = sum > 0 ? mx : 0.0;
  log_sum_ = sum > 0 ? std::log(sum) : 0.0;
}

TokenLogprob Sampler::logprobs(const float* raw, int32_t vocab, int32_t token, int32_t top_n) {
  const LogSoftmax norm(raw, vocab);
  TokenLogprob out;
  out.token = token;
  out.logprob = norm.of(raw, token);
  if (top_n > 0) {
    std::vector<int32_t> ids(vocab);
    for (int32_t i = 0; i < vocab; ++i) ids[i] = i;
    const int32_t n = std::min(top_n, vocab);
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
      const float x = std::isnan(raw[a]) ? -INFINITY : raw[a];
      const float y = std::isnan(raw[b]) ? -INFINITY : raw[b];
      return x > y || (x == y && a < b);
    });
    for (int32_t i = 0; i < n; ++i) out.top.emplace_back(ids[i], norm.of(raw, ids[i]));
  }
  return out;
}

}  // namespace kvserve
