// Turns one row of logits into the next token, per request: penalties, greedy or temperature,
// top-k, top-p, min-p, and a per-request random generator so that a seed reproduces the same
// tokens whatever else shares the batch.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "common/request.h"
#include "sampling/rank_cut.h"

namespace kvserve {

// exp over a row (x: [n], out: [n]); the kernel table's exp_array, null for std::exp.
using ExpArray = void (*)(const float* x, int64_t n, float* out);

// Log-weights (a logit's tempered distance below the best) under -kFarBelowBest are clamped
// there: their float exp is 0 either way (exp(-104) is below the smallest float), and the
// clamp keeps -inf (a distance that overflows, logits near the float limits) out of the exp.
constexpr float kFarBelowBest = 128.0f;

// log p(token) = (l - max) - log Σ exp(l - max) over a row of raw logits, with non-finite
// logits left out of the sum: the one log-softmax of the code base (sampled-token
// log-probabilities, prompt scoring). The sum is in double, of float exps through exp_array.
struct LogSoftmax {
  LogSoftmax(const float* logits, int32_t vocab, ExpArray exp_array = nullptr);
  float of(const float* logits, int32_t token) const {
    return static_cast<float>((static_cast<double>(logits[token]) - max_) - log_sum_);
  }

 private:
  double max_ = 0, log_sum_ = 0;
};

// Temperatures below this sample exactly as greedy (as vLLM's 1e-5): dividing by them leaves
// nothing but the best token anyway, and tiny ones (1e-38) would overflow the division.
constexpr float kGreedyBelowTemperature = 1e-5f;

class Sampler {
 public:
  // seed: from the request, or drawn by the engine when the request has none.
  Sampler(const SamplingParams& params, uint64_t seed, ExpArray exp_array = nullptr)
      : p_(params), rng_(seed), exp_array_(exp_array) {}

  // logits: [vocab] raw model output for this sequence (modified in place as scratch).
  // context: prompt and generated tokens so far (for the repetition penalty);
  // generated: the tail of `context` produced by this request (a view: no copy per step), for
  // the presence and frequency penalties.
  // Returns -1 when no logit is a number (a broken model), so the caller can end the request.
  int32_t sample(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                 std::span<const int32_t> generated);

  // Speculative verification of a proposed token (a single proposal, so its proposal
  // probability is 1): returns `draft` with probability p(draft) under this request's
  // distribution, and otherwise a token drawn from p with draft left out (renormalised), which
  // together is an exact draw from p (Leviathan et al., 2023). Greedy requests return the best
  // token, whatever the draft. Arguments and -1 as for sample().
  int32_t sample_against(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                         std::span<const int32_t> generated, int32_t draft);
  // The log-probability of `token` under the raw logits, and the n best alternatives.
  static TokenLogprob logprobs(const float* raw_logits, int32_t vocab, int32_t token, int32_t top_n,
                               ExpArray exp_array = nullptr);

  // The probability of every token after penalties, temperature and filters (zero where
  // filtered); for tests that compare against a reference implementation.
  std::vector<float> distribution(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                                  std::span<const int32_t> generated);

 private:
  void apply_penalties(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                       std::span<const int32_t> generated) const;
  // Penalties, temperature, top-k, top-p and min-p: leaves the tokens that can be drawn in
  // kept_ (in id order) with their weights in weight_, and returns the sum of those weights
  // (kept_ empty when no logit is a number).
  double keep(float* logits, int32_t vocab, const std::vector<int32_t>& context, std::span<const int32_t> generated);
  double weight_sum(size_t first, size_t count) const;  // of kept_[first, first + count)
  // The kept token where the running sum of weights (skip's left out) passes target.
  int32_t draw(double target, int32_t skip) const;
  double uniform();  // [0, 1) from 53 bits, the same on every platform

  // top-k up to this is taken with a heap over the logits; larger ones through RankCut's buckets.
  static constexpr int32_t kHeapTopK = 256;

  SamplingParams p_;
  std::mt19937_64 rng_;
  ExpArray exp_array_;
  // Reused scratch, [vocab]: each token's tempered log-weight relative to the best, its weight.
  std::vector<float> score_, weight_;
  std::vector<int32_t> kept_;
  std::vector<std::pair<float, int32_t>> heap_;  // a small top-k's (logit, id)
  std::vector<float> packed_;                    // its scores, then its weights
  RankCut cut_;
};

}  // namespace kvserve
