// What each attention head does, read off captured attention: the scores interpretability work
// uses (previous-token, sink, local, entropy, induction) and a label from fixed thresholds.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/request.h"

namespace kvserve {

// Label thresholds, checked in this order; the first that holds names the head.
constexpr double kInductionThreshold = 0.3;  // induction score: a clear copy-the-next-token pattern
constexpr double kPreviousThreshold = 0.5;   // half its weight on the token just before
constexpr double kSinkThreshold = 0.5;       // half its weight on the first position
constexpr double kLocalThreshold = 0.7;      // 70% on the last kLocalWindow positions
constexpr double kDiffuseThreshold = 0.8;    // normalised entropy: close to uniform
constexpr int kLocalWindow = 4;              // positions t-3..t

struct HeadScores {
  int32_t layer = 0;
  int32_t head = 0;
  double previous_token = 0.0;  // mean weight on t-1 over rows t >= 2
  double sink = 0.0;            // mean weight on position 0 over rows t >= 2
  double local = 0.0;           // mean weight on t-3..t over rows t >= 1
  double entropy = 0.0;         // mean entropy / log(t+1) over rows t >= 1: 0 = one position, 1 = uniform
  double induction = -1.0;      // on the probe: mean weight from a repeated token to its first successor; -1 = not measured
  std::string label;            // "induction", "previous-token", "sink", "local", "diffuse" or "mixed"
};

// The probe for induction heads: BOS, then `period` distinct random tokens, then the same again.
// Token ids are drawn from [first_id, vocab_size).
std::vector<int32_t> induction_probe(int32_t bos_id, int32_t first_id, int32_t vocab_size, int32_t period,
                                     uint64_t seed);

// Scores every head of `prompt`; with `probe` (the attention on induction_probe(..., period, ...)),
// the induction scores too. Labels follow the thresholds above.
std::vector<HeadScores> score_heads(const AttentionCapture& prompt, const AttentionCapture* probe, int32_t period);

std::string label_head(const HeadScores& s);

}  // namespace kvserve
