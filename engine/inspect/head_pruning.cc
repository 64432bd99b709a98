#include "inspect/head_pruning.h"

#include <algorithm>

namespace kvserve {

std::vector<HeadDrop> rank_heads(double baseline, const std::vector<double>& single, int32_t n_head) {
  std::vector<HeadDrop> heads;
  for (size_t i = 0; i < single.size(); ++i)
    heads.push_back({static_cast<int32_t>(i / n_head), static_cast<int32_t>(i % n_head), single[i],
                     baseline - single[i]});
  std::stable_sort(heads.begin(), heads.end(), [](const auto& a, const auto& b) { return a.drop > b.drop; });
  return heads;
}

std::vector<std::vector<HeadRef>> pruning_prefixes(const std::vector<HeadDrop>& ranked, double budget) {
  std::vector<HeadDrop> least(ranked.rbegin(), ranked.rend());
  size_t k_max = 0;
  for (double sum = 0.0; k_max < least.size(); ++k_max) {
    sum += std::max(0.0, least[k_max].drop);
    if (sum > 4 * budget + 1e-12) break;
  }
  k_max = std::min(least.size(), k_max + 1);
  std::vector<std::vector<HeadRef>> prefixes;
  for (size_t k = 1; k <= k_max; ++k) {
    std::vector<HeadRef> p;
    for (size_t i = 0; i < k; ++i) p.push_back({least[i].layer, least[i].head});
    prefixes.push_back(std::move(p));
  }
  return prefixes;
}

size_t prunable_count(const std::vector<double>& prefix_drops, double budget) {
  for (size_t k = prefix_drops.size(); k >= 1; --k)
    if (prefix_drops[k - 1] <= budget) return k;
  return 0;
}

}  // namespace kvserve
