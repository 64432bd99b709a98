#include "sampling/sampler.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include "sampling/rank_cut.h"

namespace kvserve {
namespace {

// After penalties: NaN can never be chosen (-inf), and an overflow to +inf (a positive logit
// divided by a tiny repetition penalty) becomes the largest float, so every difference taken
// later is a number. Returns the first index of the largest logit, or -1 when no logit is a
// number above -inf.
int32_t sanitize(float* logits, int32_t vocab) {
  // The largest in a pass that vectorises, then the first index holding it: one pass keeping
  // the index as it went could not vectorise, and it is a greedy step's whole sampling cost.
  float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (int32_t i = 0; i < vocab; ++i) {
    const float l = logits[i], c = l != l ? -INFINITY : (l < FLT_MAX ? l : FLT_MAX);
    logits[i] = c;
    mx = mx > c ? mx : c;
  }
  if (mx == -INFINITY) return -1;
  return static_cast<int32_t>(std::find(logits, logits + vocab, mx) - logits);
}

// out[i] = exp(x[i]) for i < n, through the kernel level's exp where there is one.
void exp_row(ExpArray exp_array, const float* x, int64_t n, float* out) {
  if (exp_array) {
    exp_array(x, n, out);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = std::exp(x[i]);
  }
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

double Sampler::weight_sum(size_t first, size_t count) const {
  double part[4] = {};  // four running sums: one would wait on each add's latency
  size_t k = first;
  for (; k + 4 <= first + count; k += 4)
    for (size_t j = 0; j < 4; ++j) part[j] += weight_[kept_[k + j]];
  for (; k < first + count; ++k) part[0] += weight_[kept_[k]];
  return (part[0] + part[1]) + (part[2] + part[3]);
}

double Sampler::keep(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                     std::span<const int32_t> generated) {
  apply_penalties(logits, vocab, context, generated);
  kept_.clear();
  const int32_t best = sanitize(logits, vocab);
  if (best < 0) return 0;  // nothing can be sampled
  // A small top-k first, over the logits (best_n's heap).
  const bool heap_top_k = p_.top_k > 0 && p_.top_k <= kHeapTopK && p_.top_k < vocab;
  if (heap_top_k) {
    best_n(logits, vocab, p_.top_k, heap_);
    for (const auto& [l, i] : heap_) kept_.push_back(i);
    std::sort(kept_.begin(), kept_.end());
  } else {
    kept_.resize(static_cast<size_t>(vocab));
    std::iota(kept_.begin(), kept_.end(), 0);
  }
  // Each kept token's weight relative to the best, exp((logit - best) / T): the tempered
  // difference clamped where the float weight is 0 anyway (a difference that overflows, logits
  // near the float limits, becomes -inf and is clamped too), then one exp over them.
  const float mx = logits[best], inv_t = 1.0f / p_.temperature;
  score_.resize(static_cast<size_t>(vocab));
  weight_.resize(static_cast<size_t>(vocab));
  if (heap_top_k) {  // scores and weights only where kept, at their ids
    const size_t n = kept_.size();
    packed_.resize(2 * n);
    for (size_t j = 0; j < n; ++j) packed_[j] = std::max(-kFarBelowBest, (logits[kept_[j]] - mx) * inv_t);
    exp_row(exp_array_, packed_.data(), static_cast<int64_t>(n), packed_.data() + n);
    for (size_t j = 0; j < n; ++j) score_[kept_[j]] = packed_[j], weight_[kept_[j]] = packed_[n + j];
  } else {
    float* score = score_.data();
#pragma omp simd
    for (int32_t i = 0; i < vocab; ++i) score[i] = std::max(-kFarBelowBest, (logits[i] - mx) * inv_t);
    exp_row(exp_array_, score_.data(), vocab, weight_.data());
  }
  // Keeps the tokens that rank no later than `cut` in the best-first order.
  auto keep_through = [&](int32_t cut) {
    if (cut < 0) return;
    const float cut_logit = logits[cut];
    size_t n = 0;  // compacted without a branch: most tokens go where top-k or top-p is small
    for (const int32_t i : kept_) {
      kept_[n] = i;
      n += i == cut || ranks_before(logits[i], i, cut_logit, cut);
    }
    kept_.resize(n);
  };
  if (p_.top_k > 0 && p_.top_k < vocab && !heap_top_k)
    keep_through(cut_.find(kept_, logits, score_.data(), nullptr, p_.top_k));
  // top-p: the smallest best-first prefix of the kept tokens whose mass reaches top_p.
  if (p_.top_p < 1.0f) {
    const double mass = weight_sum(0, kept_.size());
    keep_through(cut_.find(kept_, logits, score_.data(), weight_.data(), p_.top_p * mass));
  }
  // min-p: weight >= min_p relative to the best (whose score is 0 >= log(min_p): it stays).
  if (p_.min_p > 0.0f) {
    const double floor = std::log(static_cast<double>(p_.min_p));
    std::erase_if(kept_, [&](int32_t i) { return score_[i] < floor; });
  }
  return weight_sum(0, kept_.size());
}

std::vector<float> Sampler::distribution(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                                         std::span<const int32_t> generated) {
  std::vector<float> probs(vocab, 0.0f);
  if (p_.temperature < kGreedyBelowTemperature) {
    apply_penalties(logits, vocab, context, generated);
    if (const int32_t best = sanitize(logits, vocab); best >= 0) probs[best] = 1.0f;
    return probs;
  }
  const double sum = keep(logits, vocab, context, generated);
  for (int32_t i : kept_) probs[i] = static_cast<float>(weight_[i] / sum);
  return probs;
}

int32_t Sampler::sample(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                        std::span<const int32_t> generated) {
  if (p_.temperature < kGreedyBelowTemperature) {
    apply_penalties(logits, vocab, context, generated);
    return sanitize(logits, vocab);
  }
  const double sum = keep(logits, vocab, context, generated);
  if (kept_.empty()) return -1;
  return draw(uniform() * sum, -1);
}

int32_t Sampler::draw(double target, int32_t skip) const {
  // The kept tokens walked in id order (the draw follows the distribution in any order, and
  // this one needs no sort): whole runs skipped by their sums, then the run where the target
  // falls token by token.
  constexpr size_t kRun = 64;
  double acc = 0;
  size_t from = 0;
  for (double run; from + kRun <= kept_.size(); from += kRun) {
    run = weight_sum(from, kRun);
    if (skip >= 0 && skip >= kept_[from] && skip <= kept_[from + kRun - 1]) run -= weight_[skip];
    if (acc + run > target) break;
    acc += run;
  }
  int32_t last = -1;
  for (size_t k = from; k < kept_.size(); ++k) {
    const int32_t i = kept_[k];
    if (weight_[i] <= 0.0f || i == skip) continue;
    last = i;
    acc += weight_[i];
    if (acc > target) return i;
  }
  return last >= 0 ? last : kept_[0];  // rounding left the sum a hair short of the target
}

int32_t Sampler::sample_against(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                                std::span<const int32_t> generated, int32_t draft) {
  if (p_.temperature < kGreedyBelowTemperature) return sample(logits, vocab, context, generated);
  const double sum = keep(logits, vocab, context, generated);
  if (kept_.empty()) return -1;
  const bool kept = draft >= 0 && draft < vocab && std::binary_search(kept_.begin(), kept_.end(), draft);
  const double w = kept ? static_cast<double>(weight_[draft]) : 0.0;
  if (uniform() * sum < w) return draft;
  const double rest = sum - w;
  if (!(rest > 0)) return draft;  // only the draft can be drawn
  return draw(uniform() * rest, kept ? draft : -1);
}

LogSoftmax::LogSoftmax(const float* raw, int32_t vocab, ExpArray exp_array) {
  float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
  for (int32_t i = 0; i < vocab; ++i) {
    const float l = std::fabs(raw[i]) <= FLT_MAX ? raw[i] : -INFINITY;  // NaN and inf left out
    mx = mx > l ? mx : l;
  }
  if (mx == -INFINITY) return;  // no finite logit: max_ and log_sum_ stay 0
  // Chunks on the stack: a row's exps need no allocation per scored prompt row.
  constexpr int32_t kChunk = 1024;
  float x[kChunk], e[kChunk];
  double part[4] = {};  // four running sums: one would wait on each add's latency
  for (int32_t i0 = 0; i0 < vocab; i0 += kChunk) {
    const int32_t n = std::min(kChunk, vocab - i0);
    for (int32_t j = 0; j < n; ++j) {
      const float l = raw[i0 + j];
      x[j] = std::fabs(l) <= FLT_MAX ? std::max(-kFarBelowBest, l - mx) : -kFarBelowBest;
    }
    exp_row(exp_array, x, n, e);
    int32_t j = 0;
    for (; j + 4 <= n; j += 4)
      for (int k = 0; k < 4; ++k) part[k] += e[j + k];
    for (; j < n; ++j) part[0] += e[j];
  }
  max_ = mx;
  log_sum_ = std::log((part[0] + part[1]) + (part[2] + part[3]));
}

TokenLogprob Sampler::logprobs(const float* raw, int32_t vocab, int32_t token, int32_t top_n, ExpArray exp_array) {
  const LogSoftmax norm(raw, vocab, exp_array);
  TokenLogprob out;
  out.token = token;
  out.logprob = norm.of(raw, token);
  if (top_n > 0) {
    std::vector<std::pair<float, int32_t>> best;
    best_n(raw, vocab, top_n, best);
    for (const auto& [l, i] : best) out.top.emplace_back(i, norm.of(raw, i));
  }
  return out;
}

}  // namespace kvserve
