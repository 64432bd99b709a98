// Sampling against a reference implementation written here: temperature, top-k, top-p and
// min-p each shape the distribution as the reference says, draws follow it, penalties act as
// documented, and the output text never shows a stop string.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/kernel_table.h"
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

SamplingParams params_of(const Params& pr) {
  SamplingParams sp;
  sp.temperature = pr.t;
  sp.top_k = pr.k;
  sp.top_p = pr.top_p;
  sp.min_p = pr.min_p;
  return sp;
}

class SamplerDistribution : public ::testing::TestWithParam<Params> {};

TEST_P(SamplerDistribution, MatchesReferenceAndDrawsFollowIt) {
  const Params pr = GetParam();
  std::vector<float> logits = {2.0f, 1.5f, 1.4f, 0.3f, -0.5f, 0.0f, 3.1f, -2.0f, 1.0f, 0.9f};
  const SamplingParams sp = params_of(pr);
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

// Speculative verification against a single proposed token: accepting it with probability p(d)
// and otherwise drawing from p without d gives draws that follow p exactly, whatever d is (a
// likely token, an unlikely one, one the filters removed).
TEST_P(SamplerDistribution, DrawsAgainstAProposalFollowTheSameDistribution) {
  const Params pr = GetParam();
  const std::vector<float> logits = {2.0f, 1.5f, 1.4f, 0.3f, -0.5f, 0.0f, 3.1f, -2.0f, 1.0f, 0.9f};
  const SamplingParams sp = params_of(pr);
  Sampler s(sp, 17);
  const auto want = reference(logits, pr.t, pr.k, pr.top_p, pr.min_p);
  for (int32_t draft : {6, 0, 3, 7}) {
    const int draws = 30000;
    std::vector<int> counts(10, 0);
    for (int d = 0; d < draws; ++d) {
      std::vector<float> copy = logits;
      ++counts[s.sample_against(copy.data(), 10, {}, {}, draft)];
    }
    for (int i = 0; i < 10; ++i) {
      if (want[i] == 0) {
        EXPECT_EQ(counts[i], 0) << "filtered token " << i << " was drawn, draft " << draft;
      } else {
        const double sd = std::sqrt(want[i] * (1 - want[i]) / draws);
        EXPECT_NEAR(counts[i] / double(draws), want[i], 5 * sd + 1e-3) << "token " << i << ", draft " << draft;
      }
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

// Vocabulary-sized rows: the filters find their cut without sorting the row (RankCut's
// buckets, many of them, and the one where the cut falls sorted), so the kept set and the
// probabilities are held against the sorting reference on rows with many ties (logits rounded
// to 1/64) and a few -inf, on every kernel level's exp and on std::exp.
struct LargeCase {
  int vocab;
  float spread;  // standard deviation of the logits
  Params p;
};

class SamplerLargeVocab : public ::testing::TestWithParam<std::tuple<LargeCase, int>> {};

std::vector<float> large_row(int vocab, float spread, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> n(0.0f, spread);
  std::vector<float> l(vocab);
  for (float& x : l) x = std::round(n(rng) * 64.0f) / 64.0f;
  for (int i = 0; i < vocab; i += 997) l[i] = -INFINITY;
  return l;
}

TEST_P(SamplerLargeVocab, KeptSetAndProbabilitiesMatchTheSortingReference) {
  const auto [c, level] = GetParam();
  const std::vector<float> logits = large_row(c.vocab, c.spread, static_cast<uint32_t>(c.vocab));
  const std::vector<double> want = reference(logits, c.p.t, c.p.k, c.p.top_p, c.p.min_p);
  SamplingParams sp;
  sp.temperature = c.p.t;
  sp.top_k = c.p.k;
  sp.top_p = c.p.top_p;
  sp.min_p = c.p.min_p;
  const auto levels = supported_levels();
  Sampler s(sp, 1, level < 0 ? nullptr : kernel_table(levels[level]).exp_array);
  std::vector<float> copy = logits;
  const std::vector<float> got = s.distribution(copy.data(), c.vocab, {}, {});
  int kept = 0;
  for (int i = 0; i < c.vocab; ++i) {
    ASSERT_EQ(got[i] > 0, want[i] > 0) << "token " << i << " (logit " << logits[i] << ") kept by one only";
    kept += want[i] > 0;
    // Float weights (exp within two ulps of a float score): a relative error near 1e-6.
    EXPECT_NEAR(got[i], want[i], 4e-6 * want[i] + 1e-12) << "token " << i;
  }
  if (c.p.k > 0 && c.p.top_p == 1.0f && c.p.min_p == 0.0f) {
    EXPECT_EQ(kept, std::min(c.p.k, c.vocab)) << "ties at the cut are split by id";
  }
}

std::vector<std::tuple<LargeCase, int>> large_cases() {
  const std::vector<LargeCase> cases = {
      {32000, 3.0f, {1.0f, 0, 0.9f, 0.0f}},     {32000, 3.0f, {1.0f, 40, 1.0f, 0.0f}},
      {32000, 3.0f, {0.8f, 40, 0.95f, 0.05f}},  {32000, 0.3f, {1.0f, 0, 0.5f, 0.0f}},
      {32000, 0.3f, {1.0f, 20000, 1.0f, 0.0f}}, {32000, 0.05f, {1.0f, 7, 1.0f, 0.0f}},
      {152064, 2.0f, {0.7f, 0, 0.95f, 0.0f}},   {152064, 2.0f, {1.0f, 1, 1.0f, 0.0f}},
      {262144, 1.0f, {1.0f, 0, 0.8f, 0.01f}},   {1000, 5.0f, {1.5f, 100, 0.99f, 0.0f}}};
  std::vector<std::tuple<LargeCase, int>> out;
  for (const LargeCase& c : cases) {
    out.emplace_back(c, -1);  // std::exp
    for (int l = 0; l < static_cast<int>(supported_levels().size()); ++l) out.emplace_back(c, l);
  }
  return out;
}

std::string large_case_name(const ::testing::TestParamInfo<std::tuple<LargeCase, int>>& info) {
  const int level = std::get<1>(info.param);
  return "v" + std::to_string(std::get<0>(info.param).vocab) + "_case" + std::to_string(info.index) + "_" +
         (level < 0 ? std::string("std_exp") : std::string(level_name(supported_levels()[level])));
}

INSTANTIATE_TEST_SUITE_P(Rows, SamplerLargeVocab, ::testing::ValuesIn(large_cases()), large_case_name);

// Draws over more tokens than the walk skips at once (runs of 64): token frequencies, grouped,
// follow the distribution.
TEST(Sampler, DrawsOverAWholeVocabularyFollowTheDistribution) {
  const int vocab = 5000, groups = 50, draws = 60000;
  std::vector<float> logits = large_row(vocab, 1.0f, 11);
  for (int i = 0; i < vocab; i += 613) logits[i] = 4.0f;  // a few likely tokens spread over the row
  SamplingParams sp;
  const std::vector<double> want = reference(logits, 1.0f, 0, 1.0f, 0.0f);
  Sampler s(sp, 99, kernel_table(supported_levels().back()).exp_array);
  std::vector<int> counts(groups, 0);
  for (int d = 0; d < draws; ++d) {
    std::vector<float> copy = logits;
    const int32_t t = s.sample(copy.data(), vocab, {}, {});
    ASSERT_GE(t, 0);
    ASSERT_GT(want[t], 0.0) << "drew token " << t << " of probability 0";
    ++counts[t * groups / vocab];
  }
  for (int g = 0; g < groups; ++g) {
    double p = 0;
    for (int i = g * vocab / groups; i < (g + 1) * vocab / groups; ++i) p += want[i];
    const double sd = std::sqrt(p * (1 - p) / draws);
    EXPECT_NEAR(counts[g] / double(draws), p, 5 * sd + 1e-4) << "group " << g;
  }
}


// The same over a whole vocabulary, where the draw skips runs of 64 tokens by their sums and the
// proposal sits inside one of them; greedy ignores the proposal and takes the best token.
TEST(Sampler, DrawsAgainstAProposalOverAWholeVocabularyFollowTheDistribution) {
  const int vocab = 5000, groups = 50, draws = 60000;
  std::vector<float> logits = large_row(vocab, 1.0f, 11);
  for (int i = 0; i < vocab; i += 613) logits[i] = 4.0f;
  const int32_t draft = 613 * 3;
  SamplingParams sp;
  const std::vector<double> want = reference(logits, 1.0f, 0, 1.0f, 0.0f);
  Sampler s(sp, 5, kernel_table(supported_levels().back()).exp_array);
  std::vector<int> counts(groups, 0);
  int drafts = 0;
  for (int d = 0; d < draws; ++d) {
    std::vector<float> copy = logits;
    const int32_t t = s.sample_against(copy.data(), vocab, {}, {}, draft);
    ASSERT_GE(t, 0);
    drafts += t == draft;
    ++counts[t * groups / vocab];
  }
  EXPECT_NEAR(drafts / double(draws), want[draft], 5 * std::sqrt(want[draft] / draws) + 1e-4);
  for (int g = 0; g < groups; ++g) {
    double p = 0;
    for (int i = g * vocab / groups; i < (g + 1) * vocab / groups; ++i) p += want[i];
    const double sd = std::sqrt(p * (1 - p) / draws);
    EXPECT_NEAR(counts[g] / double(draws), p, 5 * sd + 1e-4) << "group " << g;
  }
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  Sampler g(greedy, 5);
  std::vector<float> copy = logits;
  copy[42] = 9.0f;
  EXPECT_EQ(g.sample_against(copy.data(), vocab, {}, {}, draft), 42);
}

// The log-softmax of a 152k-token row (float exps summed in double) against one taken wholly in
// double, with NaN and infinite logits left out of both, on std::exp and every level's exp.
TEST(Sampler, LogSoftmaxOfAVocabularyRowMatchesDouble) {
  std::vector<float> row = large_row(152064, 2.5f, 5);
  row[10] = std::numeric_limits<float>::quiet_NaN();
  row[20] = INFINITY;
  row[30] = 11.0f;  // a clear best
  double mx = -INFINITY;
  for (float l : row)
    if (std::isfinite(l)) mx = std::max(mx, static_cast<double>(l));
  double sum = 0;
  for (float l : row)
    if (std::isfinite(l)) sum += std::exp(static_cast<double>(l) - mx);
  const double lse = mx + std::log(sum);
  std::vector<ExpArray> exps = {nullptr};
  for (KernelLevel level : supported_levels()) exps.push_back(kernel_table(level).exp_array);
  // The 20 best alternatives: the sorting order (NaN last, ties by the lower id; the +inf logit
  // first, as the model gave it).
  std::vector<int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  auto key = [&](int32_t i) { return std::isnan(row[i]) ? -INFINITY : row[i]; };
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return key(a) > key(b); });
  for (ExpArray e : exps) {
    const LogSoftmax norm(row.data(), static_cast<int32_t>(row.size()), e);
    for (int32_t t : {30, 31, 500, 77777, 152063}) {
      ASSERT_TRUE(std::isfinite(row[t]));
      EXPECT_NEAR(norm.of(row.data(), t), static_cast<double>(row[t]) - lse, 2e-6) << "token " << t;
    }
    const TokenLogprob lp = Sampler::logprobs(row.data(), static_cast<int32_t>(row.size()), 31, 20, e);
    ASSERT_EQ(lp.top.size(), 20u);
    for (size_t r = 0; r < 20; ++r) {
      EXPECT_EQ(lp.top[r].first, order[r]) << "rank " << r;
      if (r > 0) {
        EXPECT_NEAR(lp.top[r].second, static_cast<double>(row[lp.top[r].first]) - lse, 2e-6);
      }
    }
  }
}

}  // namespace
}  // namespace kvserve
