#include "sampling/rank_cut.h"

#include <algorithm>

namespace kvserve {
namespace {
// About this many candidates a bucket when scores are spread evenly: the one bucket sorted stays small.
constexpr size_t kPerBucket = 8;
constexpr size_t kMaxBuckets = 16384;
}  // namespace

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
