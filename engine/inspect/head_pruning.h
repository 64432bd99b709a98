// The head-importance search (HeadImportance), as plain arithmetic over measured log-likelihoods:
// rank heads by how much zeroing each alone lowers the text's mean log-likelihood, then pick
// which could be removed together within a loss budget. Single drops need not add up, so the
// candidates (least important first) are measured as prefixes, each zeroed all at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/request.h"

namespace kvserve {

struct HeadDrop {
  int32_t layer = 0, head = 0;
  double mean_logprob = 0;  // with this head zeroed
  double drop = 0;          // baseline - mean_logprob (nats/token)
};

// single[i]: the mean log-likelihood with head i (layer i / n_head, head i % n_head) zeroed.
// Returns every head, most important (largest drop) first; ties keep layer/head order.
std::vector<HeadDrop> rank_heads(double baseline, const std::vector<double>& single, int32_t n_head);

// The prefixes of the least important heads worth measuring together: every prefix whose single
// drops (negative ones counted as zero) sum to at most four budgets, and one more.
std::vector<std::vector<HeadRef>> pruning_prefixes(const std::vector<HeadDrop>& ranked, double budget);

// prefix_drops[k-1]: the measured drop with the first k candidates zeroed together. Returns the
// largest k whose drop fits the budget (0 if none does).
size_t prunable_count(const std::vector<double>& prefix_drops, double budget);

}  // namespace kvserve
