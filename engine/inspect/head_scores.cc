#include "inspect/head_scores.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kvserve {

std::vector<int32_t> induction_probe(int32_t bos_id, int32_t first_id, int32_t vocab_size, int32_t period,
                                     uint64_t seed) {
  std::vector<int32_t> pool(vocab_size - first_id);
  std::iota(pool.begin(), pool.end(), first_id);
  std::mt19937_64 rng(seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  pool.resize(std::min<size_t>(pool.size(), period));
  std::vector<int32_t> out{bos_id};
  for (int copy = 0; copy < 2; ++copy) out.insert(out.end(), pool.begin(), pool.end());
  return out;
}

std::string label_head(const HeadScores& s) {
  if (s.induction >= kInductionThreshold) return "induction";
  if (s.previous_token >= kPreviousThreshold) return "previous-token";
  if (s.sink >= kSinkThreshold) return "sink";
  if (s.local >= kLocalThreshold) return "local";
  if (s.entropy >= kDiffuseThreshold) return "diffuse";
  return "mixed";
}

std::vector<HeadScores> score_heads(const AttentionCapture& a, const AttentionCapture* probe, int32_t period) {
  std::vector<HeadScores> out;
  const int32_t n = a.n_tokens;
  for (int32_t l = 0; l < a.n_layer; ++l) {
    for (int32_t h = 0; h < a.n_head; ++h) {
      HeadScores s;
      s.layer = l;
      s.head = h;
      int rows2 = 0, rows1 = 0;
      for (int32_t t = 1; t < n; ++t) {
        const float* row = a.row(l, h, t);
        ++rows1;
        for (int32_t u = std::max(0, t - kLocalWindow + 1); u <= t; ++u) s.local += row[u];
        double ent = 0.0;
        for (int32_t u = 0; u <= t; ++u)
          if (row[u] > 0.0f) ent -= row[u] * std::log(static_cast<double>(row[u]));
        s.entropy += ent / std::log(static_cast<double>(t + 1));
        if (t >= 2) {
          ++rows2;
          s.previous_token += row[t - 1];
          s.sink += row[0];
        }
      }
      if (rows1) {
        s.local /= rows1;
        s.entropy /= rows1;
      }
      if (rows2) {
        s.previous_token /= rows2;
        s.sink /= rows2;
      }
      // In the probe's second copy (positions period+1 .. 2·period), the token at i first
      // appeared at i - period; the token that followed it sits at i - period + 1.
      if (probe && probe->n_tokens == 2 * period + 1 && l < probe->n_layer && h < probe->n_head) {
        double sum = 0.0;
        for (int32_t i = period + 1; i <= 2 * period; ++i) sum += probe->row(l, h, i)[i - period + 1];
        s.induction = sum / period;
      }
      s.label = label_head(s);
      out.push_back(std::move(s));
    }
  }
  return out;
}

}  // namespace kvserve
