#include "model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace kvserve {

void route_token(const float* logits, const MoeRouting& r, int32_t* experts, float* weights) {
  const int32_t n = r.n_expert, k = r.n_used;
  // The scores that choose (and, but for kSoftmaxOfChosen, weigh) the experts.
  thread_local std::vector<float> score;
  thread_local std::vector<int32_t> order;
  score.assign(logits, logits + n);
  if (r.gating == MoeGating::kSoftmax) {
    const float top = *std::max_element(score.begin(), score.end());
    float sum = 0.0f;
    for (float& s : score) sum += (s = std::exp(s - top));
    for (float& s : score) s /= sum;
  } else if (r.gating == MoeGating::kSigmoid) {
    for (float& s : score) s = 1.0f / (1.0f + std::exp(-s));
  }
  // A NaN (from weights that overflow) would leave the order undefined: it ranks last instead.
  for (float& s : score)
    if (std::isnan(s)) s = -INFINITY;
  order.resize(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int32_t a, int32_t b) { return score[a] > score[b] || (score[a] == score[b] && a < b); });
  for (int32_t j = 0; j < k; ++j) experts[j] = order[j], weights[j] = score[order[j]];
  if (r.gating == MoeGating::kSoftmaxOfChosen) {  // weights[0] is the largest logit
    float sum = 0.0f;
    for (int32_t j = 0; j < k; ++j) sum += (weights[j] = std::exp(weights[j] - score[order[0]]));
    for (int32_t j = 0; j < k; ++j) weights[j] /= sum;
  }
  if (r.normalize) {
    float sum = 0.0f;
    for (int32_t j = 0; j < k; ++j) sum += weights[j];
    sum = std::max(sum, 6.103515625e-5f);
    for (int32_t j = 0; j < k; ++j) weights[j] /= sum;
  }
  if (r.scale != 1.0f)
    for (int32_t j = 0; j < k; ++j) weights[j] *= r.scale;
}

}  // namespace kvserve
