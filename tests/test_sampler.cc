// Sampling against a reference implementation written here: temperature, top-k, top-p and
// min-p each shape the distribution as the reference says, draws follow it, penalties act as
// documented, and the output text never shows a stop string.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "sampling/sampler.h"

namespace kvserve {
namespace {

// Reference: softmax(logits / T), keep the top k, then the smallest nucleus reaching top_p,
// then tokens with p >= min_p · p_max; renormalise.
std::vector<double> reference(const std::vector<float>& logits, float t, int k, float top_p, float min_p) {
  const int n = static_cast<int>(logits.size());
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
  std::vector<double> p(n);
  double z = 0;
  for (int i = 0; i < n; ++i) z += p[i] = std::exp((logits[i] - logits[order[0]]) / t);
  for (auto& x : p) x /= z;
  std::vector<bool> keep(n, false);
  int kept = k > 0 ? std::min(k, n) : n;
  // Nucleus over the top-k renormalised.
  double zk = 0;
  for (int i = 0; i < kept; ++i) zk += p[order[i]];
  double acc = 0;
  int nucleus = kept;
  for (int i = 0; i < kept; ++i) {
    acc += p[order[i]] / zk;
    if (acc >= top_p) {
      nucleus = i + 1;
      break;
    }
  }
  for (int i = 0; i < nucleus; ++i)
    if (i == 0 || p[order[i]] >= min_p * p[order[0]]) keep[order[i]] = true;
  double zz = 0;
  for (int i = 0; i < n; ++i) zz += keep[i] ? p[i] : 0;
  std::vector<double> out(n);
  for (int i = 0; i < n; ++i) out[i] = keep[i] ? p[i] / zz : 0;
  return out;
}

struct Params {
  float t;
  int k;
  float top_p, min_p;
};

class SamplerDistribution : public ::testing::TestWithParam<Params> {};

TEST_P(SamplerDistribution, MatchesReferenceAndDrawsFollowIt) {
  const Params pr = GetParam();
  std::vector<float> logits = {2.0f, 1.5f, 1.4f, 0.3f, -0.5f, 0.0f, 3.1f, -2.0f, 1.0f, 0.9f};
  SamplingParams sp;
  sp.temperature = pr.t;
  sp.top_k = pr.k;
  sp.top_p = pr.top_p;
  sp.min_p = pr.min_p;
  Sampler s(sp, 7);
  std::vector<float> copy = logits;
  auto got = s.distribution(copy.data(), 10, {}, {});
  auto want = reference(logits, pr.t, pr.k, pr.top_p, pr.min_p);
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(got[i], want[i], 1e-6) << "token " << i;

  const int draws = 40000;
  std::vector<int> counts(10, 0);
  for (int d = 0; d < draws; ++d) {
    copy = logits;
    ++counts[s.sample(copy.data(), 10, {}, {})];
  }
  for (int i = 0; i < 10; ++i) {
    if (want[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "filtered token " << i << " was drawn";
    } else {
      const double sd = std::sqrt(want[i] * (1 - want[i]) / draws);
      EXPECT_NEAR(counts[i] / double(draws), want[i], 5 * sd + 1e-3) << "token " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Filters, SamplerDistribution,
                         ::testing::Values(Params{1.0f, 0, 1.0f, 0.0f}, Params{0.5f, 0, 1.0f, 0.0f},
                                           Params{2.0f, 0, 1.0f, 0.0f}, Params{1.0f, 3, 1.0f, 0.0f},
                                           Params{1.0f, 0, 0.8f, 0.0f}, Params{1.0f, 0, 1.0f, 0.2f},
                                           Params{0.7f, 5, 0.9f, 0.05f}));

TEST(Sampler, GreedyPicksArgmaxAndSeedsRepeat) {
  SamplingParams sp;
  sp.temperature = 0;
  std::vector<float> l = {0.1f, 5.0f, 4.9f};
  EXPECT_EQ(Sampler(sp, 1).sample(l.data(), 3, {}, {}), 1);
  sp.temperature = 1.0f;
  Sampler a(sp, 42), b(sp, 42);
  for (int i = 0; i < 100; ++i) {
    std::vector<float> x = {0.0f, 0.1f, 0.2f, 0.3f}, y = x;
    EXPECT_EQ(a.sample(x.data(), 4, {}, {}), b.sample(y.data(), 4, {}, {}));
  }
}

TEST(Sampler, PenaltiesActAsDocumented) {
  SamplingParams sp;
  sp.temperature = 0;
  sp.repetition_penalty = 2.0f;
  std::vector<float> l = {4.0f, -1.0f, 3.0f};
  std::vector<float> x = l;
  Sampler(sp, 1).distribution(x.data(), 3, {0, 1}, {});
  EXPECT_FLOAT_EQ(x[0], 2.0f);   // positive: divided
  EXPECT_FLOAT_EQ(x[1], -2.0f);  // negative: multiplied
  EXPECT_FLOAT_EQ(x[2], 3.0f);
  sp.repetition_penalty = 1.0f;
  sp.presence_penalty = 0.5f;
  sp.frequency_penalty = 0.25f;
  x = l;
  const std::vector<int32_t> generated = {2, 2, 2};
  Sampler(sp, 1).distribution(x.data(), 3, {0, 2, 2, 2}, generated);
  EXPECT_FLOAT_EQ(x[0], 4.0f);                      // in the prompt only: untouched
  EXPECT_FLOAT_EQ(x[2], 3.0f - 0.5f - 3 * 0.25f);   // generated three times
}

TEST(Sampler, LogprobsAreLogSoftmax) {
  std::vector<float> l = {1.0f, 2.0f, 3.0f};
  TokenLogprob lp = Sampler::logprobs(l.data(), 3, 0, 2);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  EXPECT_NEAR(lp.logprob, 1.0 - lse, 1e-6);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].first, 2);
  EXPECT_NEAR(lp.top[1].second, 2.0 - lse, 1e-6);
}

}  // namespace
}  // namespace kvserve
