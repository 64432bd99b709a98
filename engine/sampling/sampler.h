// Turns one row of logits into the next token, per request: penalties, greedy or temperature,
// top-k, top-p, min-p, and a per-request random generator so that a seed reproduces the same
// tokens whatever else shares the batch.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "runtime/request.h"

namespace kvserve {

// log p(token) = (l - max) - log Σ exp(l - max) over a row of raw logits, in double, with
// non-finite logits left out of the sum: the one log-softmax of the code base (sampled-token
// log-probabilities, prompt scoring).
struct LogSoftmax {
  explicit LogSoftmax(const float* logits, int32_t vocab);
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
  Sampler(const SamplingParams& params, uint64_t seed) : p_(params), rng_(seed) {}

  // logits: [vocab] raw model output for this sequence (modified in place as scratch).
  // context: prompt and generated tokens so far (for the repetition penalty);
  // generated: the tail of `context` produced by this request (a view: no copy per step), for
  // the presence and frequency penalties.
  // Returns -1 when no logit is a number (a broken model), so the caller can end the request.
  int32_t sample(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                 std::span<const int32_t> generated);

  // The log-probability of `token` under the raw logits, and the n best alternatives.
  static TokenLogprob logprobs(const float* raw_logits, int32_t vocab, int32_t token, int32_t top_n);

  // The probability of every token after penalties, temperature and filters (zero where
  // filtered); for tests that compare against a reference implementation.
  std::vector<float> distribution(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                                  std::span<const int32_t> generated);

 private:
  void apply_penalties(float* logits, int32_t vocab, const std::vector<int32_t>& context,
                       std::span<const int32_t> generated) const;
  double uniform();  // [0, 1) from 53 bits, the same on every platform

  SamplingParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;  // reused scratch
};

}  // namespace kvserve
