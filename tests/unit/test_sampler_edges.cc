// Floating-point edges of sampling, each against what the arithmetic should give: temperatures
// down to the smallest float behave exactly as greedy; penalties that overflow a float, the
// smallest accepted top_p and min_p, and NaN or infinite logits still give a distribution of
// numbers that sums to one; a row with no usable logit is reported (-1), never sampled from.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "runtime/request_validation.h"
#include "sampling/sampler.h"

namespace kvserve {
namespace {

// A row like a real model's: a few likely tokens, a long tail, and a near-impossible one that
// the NaN of an overflowed division used to pick.
std::vector<float> model_like_row() {
  std::vector<float> l(512);
  for (size_t i = 0; i < l.size(); ++i) l[i] = std::sin(static_cast<float>(i) * 0.37f) * 4.0f;
  l[17] = 9.5f;   // the argmax
  l[301] = 9.25f; // a close second
  l[42] = -23.0f;
  return l;
}

// Empty when validation accepts these sampling parameters.
std::string accepts(const SamplingParams& sp, int32_t vocab) {
  Request r;
  r.prompt = {1};
  r.sampling = sp;
  return validate_request(r, {.vocab_size = vocab, .max_model_len = 1024});
}

void expect_distribution(const std::vector<float>& probs) {
  double sum = 0;
  for (float p : probs) {
    ASSERT_TRUE(std::isfinite(p));
    ASSERT_GE(p, 0.0f);
    sum += p;
  }
  EXPECT_NEAR(sum, 1.0, 1e-5);
}

TEST(SamplerEdges, TinyTemperaturesAreExactlyGreedy) {
  const std::vector<float> row = model_like_row();
  for (float t : {1e-6f, 1e-20f, 1e-38f, 1e-40f, 1e-45f}) {
    SamplingParams sp;
    sp.temperature = t;
    ASSERT_EQ(accepts(sp, 512), "")
        << "temperature " << t << " is accepted";
    for (uint64_t seed = 0; seed < 200; ++seed) {
      std::vector<float> l = row;
      ASSERT_EQ(Sampler(sp, seed).sample(l.data(), 512, {}, {}), 17) << "temperature " << t << " seed " << seed;
    }
    std::vector<float> l = row;
    const std::vector<float> probs = Sampler(sp, 1).distribution(l.data(), 512, {}, {});
    expect_distribution(probs);
    EXPECT_EQ(probs[17], 1.0f) << "temperature " << t;
  }
}

TEST(SamplerEdges, SmallButSamplingTemperatureSplitsTiesOnly) {
  // At 1e-5 the two best tokens, 0.25 apart, are exp(-25000) apart: the best always wins, and
  // the arithmetic (in double) stays finite.
  std::vector<float> l = model_like_row();
  SamplingParams sp;
  sp.temperature = 1e-5f;
  const std::vector<float> probs = Sampler(sp, 3).distribution(l.data(), 512, {}, {});
  expect_distribution(probs);
  EXPECT_EQ(probs[17], 1.0f);
}

TEST(SamplerEdges, HugeLogitsAndOverflowingPenaltiesStayNumbers) {
  // Logits at the float limits, and a repetition penalty that pushes a positive logit past
  // FLT_MAX (4 / 1e-38 = 4e38): the penalised token becomes the best, as the exact arithmetic
  // says, and nothing turns into NaN.
  std::vector<float> l = {FLT_MAX, -FLT_MAX, 4.0f, -4.0f, 0.0f, FLT_MAX / 2};
  SamplingParams sp;
  sp.temperature = 0.7f;
  sp.repetition_penalty = 1e-38f;
  sp.presence_penalty = -2.0f;
  sp.frequency_penalty = -2.0f;
  ASSERT_EQ(accepts(sp, 6), "");
  const std::vector<int32_t> generated = {0, 0, 0};
  std::vector<float> x = l;
  std::vector<float> probs = Sampler(sp, 5).distribution(x.data(), 6, {2, 0, 0, 0}, generated);
  expect_distribution(probs);
  // Token 0: FLT_MAX/1e-38 overflows, then +2+6; token 2: 4/1e-38 overflows too. Both end at
  // FLT_MAX and share the mass; token 5 is FLT_MAX/2 below them: exp(-huge) = 0.
  EXPECT_NEAR(probs[0], 0.5, 1e-6);
  EXPECT_NEAR(probs[2], 0.5, 1e-6);
  EXPECT_EQ(probs[5], 0.0f);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    std::vector<float> y = l;
    const int32_t t = Sampler(sp, seed).sample(y.data(), 6, {2, 0, 0, 0}, generated);
    EXPECT_TRUE(t == 0 || t == 2) << t;
  }
  // A large frequency penalty over a long output stays finite too.
  SamplingParams fp;
  fp.frequency_penalty = 2.0f;
  std::vector<int32_t> many(100000, 1);
  std::vector<float> z = {1.0f, 1e30f, 0.5f};
  probs = Sampler(fp, 1).distribution(z.data(), 3, many, many);
  expect_distribution(probs);
  EXPECT_NEAR(probs[1], 1.0, 1e-6);  // 1e30 - 2e5 is still far ahead
}

TEST(SamplerEdges, SmallestAcceptedTopPAndMinP) {
  const std::vector<float> row = model_like_row();
  SamplingParams sp;
  sp.top_p = std::numeric_limits<float>::denorm_min();
  ASSERT_EQ(accepts(sp, 512), "");
  std::vector<float> l = row;
  std::vector<float> probs = Sampler(sp, 1).distribution(l.data(), 512, {}, {});
  expect_distribution(probs);
  EXPECT_EQ(probs[17], 1.0f);  // the nucleus is the best token alone

  SamplingParams mp;
  mp.min_p = std::numeric_limits<float>::denorm_min();
  ASSERT_EQ(accepts(mp, 512), "");
  l = row;
  probs = Sampler(mp, 1).distribution(l.data(), 512, {}, {});
  expect_distribution(probs);
  // Every token is within a factor of denorm_min of the best, so nothing is dropped: the result
  // is the plain softmax.
  double z = 0;
  for (float x : row) z += std::exp(static_cast<double>(x) - 9.5);
  for (size_t i = 0; i < row.size(); ++i) EXPECT_NEAR(probs[i], std::exp(row[i] - 9.5) / z, 1e-6) << i;
}

TEST(SamplerEdges, NanAndInfiniteLogitsAreNeverChosenAndAllNanIsReported) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<float> l = {nan, 1.0f, -INFINITY, 2.0f, nan};
  EXPECT_EQ(Sampler(greedy, 1).sample(l.data(), 5, {}, {}), 3);
  SamplingParams warm;
  for (uint64_t seed = 0; seed < 100; ++seed) {
    std::vector<float> x = {nan, 1.0f, -INFINITY, 2.0f, nan};
    const int32_t t = Sampler(warm, seed).sample(x.data(), 5, {}, {});
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
  // +inf is the largest float: it wins, and the others keep no mass.
  std::vector<float> inf_row = {1.0f, INFINITY, 3.0f};
  const std::vector<float> probs = Sampler(warm, 1).distribution(inf_row.data(), 3, {}, {});
  expect_distribution(probs);
  EXPECT_EQ(probs[1], 1.0f);
  for (SamplingParams sp : {greedy, warm}) {
    std::vector<float> bad = {nan, -INFINITY, nan};
    EXPECT_EQ(Sampler(sp, 1).sample(bad.data(), 3, {}, {}), -1);
  }
}

TEST(SamplerEdges, LogprobsIgnoreNonFiniteLogits) {
  const std::vector<float> l = {1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f, -INFINITY};
  const TokenLogprob lp = Sampler::logprobs(l.data(), 4, 2, 2);
  const double lse = std::log(std::exp(1.0) + std::exp(2.0));
  EXPECT_NEAR(lp.logprob, 2.0 - lse, 1e-6);
  ASSERT_EQ(lp.top.size(), 2u);
  EXPECT_EQ(lp.top[0].first, 2);
  // Huge logits: the log-sum-exp is taken in double around the maximum.
  const std::vector<float> big = {FLT_MAX, FLT_MAX, -FLT_MAX};
  const TokenLogprob b = Sampler::logprobs(big.data(), 3, 0, 0);
  EXPECT_NEAR(b.logprob, -std::log(2.0), 1e-6);
}

}  // namespace
}  // namespace kvserve
