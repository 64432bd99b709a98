// Picks from a best-first order of the vocabulary without sorting it. Top-k (a count) and
// top-p (a mass) each need only the candidate at which the running measure, taken best first,
// first reaches the target: RankCut spreads the candidates over buckets of their score, sums the
// buckets best first and sorts only the one bucket where the target falls, O(n), the same
// candidate a sort gives (sorting 32k-150k logits for every sampled token cost as much as the
// model's decode step). best_n takes a few best ones (a small top-k, the logprobs' alternatives).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace kvserve {

// The best-first order: the higher logit first, equal logits by the lower id.
inline bool ranks_before(float logit_a, int32_t id_a, float logit_b, int32_t id_b) {
  return logit_a > logit_b || (logit_a == logit_b && id_a < id_b);
}

// The n best of logits[0, vocab) in the best-first order, into best (NaN ranks as -inf): a heap
// of n whose top is the worst of them, so nearly every token costs one compare.
void best_n(const float* logits, int32_t vocab, int32_t n, std::vector<std::pair<float, int32_t>>& best);

class RankCut {
 public:
  // ids: the candidates, in any order. logits[id]: their logits (no NaN). score[id]: a map of
  // the logit into [-far, 0] that never decreases as the logit grows (the tempered log-weight
  // relative to the best), used only to bucket them. measure[id]: each candidate's share of the
  // measure, null for 1 each (a count). Returns the candidate at which the measure summed in
  // best-first order first reaches `target` (>=), or -1 when the whole sum stays below it.
  int32_t find(std::span<const int32_t> ids, const float* logits, const float* score, const float* measure,
               double target);

 private:
  struct Member {
    float logit;
    int32_t id;
  };
  // Reused scratch: the bucket of each candidate (in ids order), the measure of each bucket.
  std::vector<uint32_t> bucket_of_;
  std::vector<double> bucket_measure_;
  std::vector<Member> members_;
};

}  // namespace kvserve
