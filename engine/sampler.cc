#include "sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace kvserve {

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
  if (p_.temperature <= 0.0f) {
    probs[std::max_element(logits, logits + vocab) - logits] = 1.0f;
    return probs;
  }
  // Candidates sorted by logit, best first (ties: lower id first, so results are deterministic).
  cand_.clear();
  for (int32_t i = 0; i < vocab; ++i) cand_.emplace_back(logits[i] / p_.temperature, i);
  auto better = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t n = cand_.size();
  if (p_.top_k > 0 && static_cast<size_t>(p_.top_k) < n) {
    std::partial_sort(cand_.begin(), cand_.begin() + p_.top_k, cand_.end(), better);
    n = p_.top_k;
  } else {
    std::sort(cand_.begin(), cand_.end(), better);
  }
  const float mx = cand_[0].first;
  std::vector<double> w(n);
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += (w[i] = std::exp(static_cast<double>(cand_[i].first - mx)));
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
  if (p_.temperature <= 0.0f) {
    apply_penalties(logits, vocab, context, generated);
    return static_cast<int32_t>(std::max_element(logits, logits + vocab) - logits);
  }
  std::vector<float> probs = distribution(logits, vocab, context, generated);
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

TokenLogprob Sampler::logprobs(const float* raw, int32_t vocab, int32_t token, int32_t top_n) {
  const float mx = *std::max_element(raw, raw + vocab);
  double sum = 0;
  for (int32_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(raw[i] - mx));
  const double lse = mx + std::log(sum);
  TokenLogprob out;
  out.token = token;
  out.logprob = static_cast<float>(raw[token] - lse);
  if (top_n > 0) {
    std::vector<int32_t> ids(vocab);
    for (int32_t i = 0; i < vocab; ++i) ids[i] = i;
    const int32_t n = std::min(top_n, vocab);
    std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                      [&](int32_t a, int32_t b) { return raw[a] > raw[b] || (raw[a] == raw[b] && a < b); });
    for (int32_t i = 0; i < n; ++i) out.top.emplace_back(ids[i], static_cast<float>(raw[ids[i]] - lse));
  }
  return out;
}

}  // namespace kvserve
