#include "sampling/rank_cut.h"

#include <algorithm>
#include <cmath>

namespace kvserve {
namespace {
// About this many candidates a bucket when scores are spread evenly: the one bucket sorted stays small.
constexpr size_t kPerBucket = 8;
constexpr size_t kMaxBuckets = 16384;
}  // namespace

void best_n(const float* logits, int32_t vocab, int32_t n, std::vector<std::pair<float, int32_t>>& best) {
  n = std::clamp(n, 0, vocab);
  // Ordered best first, so the heap's top is the worst of the n.
  auto best_first = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
    return ranks_before(a.first, a.second, b.first, b.second);
  };
  auto logit = [&](int32_t i) { return logits[i] != logits[i] ? -INFINITY : logits[i]; };
  best.clear();
  for (int32_t i = 0; i < n; ++i) best.emplace_back(logit(i), i);
  std::make_heap(best.begin(), best.end(), best_first);
  // Blocks whose largest logit is below the worst kept one are passed over on that maximum, which
  // vectorises; nearly all of them are once the heap holds good tokens.
  constexpr int32_t kBlock = 64;
  for (int32_t i0 = n; i0 < vocab && n > 0; i0 += kBlock) {
    const int32_t end = std::min(vocab, i0 + kBlock);
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int32_t i = i0; i < end; ++i) {
      const float l = logit(i);
      mx = mx > l ? mx : l;
    }
    if (mx < best.front().first) continue;
    for (int32_t i = i0; i < end; ++i) {
      const float l = logit(i);
      if (!ranks_before(l, i, best.front().first, best.front().second)) continue;
      std::pop_heap(best.begin(), best.end(), best_first);
      best.back() = {l, i};
      std::push_heap(best.begin(), best.end(), best_first);
    }
  }
  std::sort_heap(best.begin(), best.end(), best_first);
}

int32_t RankCut::find(std::span<const int32_t> ids, const float* logits, const float* score, const float* measure,
                      double target) {
  if (ids.empty()) return -1;
  // The lowest score, over kLanes running minimums (one would wait on each min's latency).
  constexpr size_t kLanes = 8;
  float low[kLanes] = {};
  size_t i = 0;
  for (; i + kLanes <= ids.size(); i += kLanes)
    for (size_t j = 0; j < kLanes; ++j) low[j] = std::min(low[j], score[ids[i + j]]);
  for (; i < ids.size(); ++i) low[0] = std::min(low[0], score[ids[i]]);
  const float lowest = *std::min_element(low, low + kLanes);
  const size_t buckets = std::clamp<size_t>(ids.size() / kPerBucket, 1, kMaxBuckets);
  // Bucket 0 holds the best scores; a better candidate never lands in a later bucket.
  const float per_unit = lowest < 0.0f ? static_cast<float>(buckets) / -lowest : 0.0f;
  bucket_of_.resize(ids.size());
  for (i = 0; i < ids.size(); ++i)
    bucket_of_[i] = std::min(static_cast<uint32_t>(buckets - 1), static_cast<uint32_t>(-score[ids[i]] * per_unit));
  bucket_measure_.assign(buckets, 0.0);
  if (measure) {
    for (i = 0; i < ids.size(); ++i) bucket_measure_[bucket_of_[i]] += measure[ids[i]];
  } else {
    for (i = 0; i < ids.size(); ++i) bucket_measure_[bucket_of_[i]] += 1.0;
  }
  double before = 0;  // the measure of the buckets ahead of `at`
  uint32_t at = 0;
  for (; at < buckets && before + bucket_measure_[at] < target; ++at) before += bucket_measure_[at];
  if (at == buckets) return -1;

  members_.clear();
  const uint32_t* bucket_of = bucket_of_.data();  // not reloaded after each push_back
  for (i = 0; i < ids.size(); ++i)
    if (bucket_of[i] == at) members_.push_back({logits[ids[i]], ids[i]});
  std::sort(members_.begin(), members_.end(),
            [](const Member& a, const Member& b) { return ranks_before(a.logit, a.id, b.logit, b.id); });
  for (const Member& m : members_)
    if ((before += measure ? measure[m.id] : 1.0) >= target) return m.id;
  // The bucket's sum reached the target above but not member by member: rounding alone.
  return members_.back().id;
}

}  // namespace kvserve
