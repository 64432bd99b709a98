// Expert routing (model/moe_routing.h) against a naive double-precision restatement of
// llama.cpp's build_moe_ffn for each gating function: which experts, in which order, and with
// what weights; ties go to the lower index, and a NaN logit is never chosen over a number.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "model/moe_routing.h"

namespace kvserve {
namespace {

struct Choice {
  std::vector<int32_t> experts;
  std::vector<double> weights;
};

Choice naive(const std::vector<float>& logits, const MoeRouting& r) {
  const size_t n = logits.size();
  std::vector<double> score(logits.begin(), logits.end());
  if (r.gating == MoeGating::kSoftmax) {
    double sum = 0;
    for (double s : score) sum += std::exp(s);
    for (double& s : score) s = std::exp(s) / sum;
  } else if (r.gating == MoeGating::kSigmoid) {
    for (double& s : score) s = 1.0 / (1.0 + std::exp(-s));
  }
  std::vector<int32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return score[a] > score[b]; });
  Choice c;
  for (int32_t j = 0; j < r.n_used; ++j) c.experts.push_back(idx[j]), c.weights.push_back(score[idx[j]]);
  if (r.gating == MoeGating::kSoftmaxOfChosen) {
    double sum = 0;
    for (double w : c.weights) sum += std::exp(w);
    for (double& w : c.weights) w = std::exp(w) / sum;
  }
  if (r.normalize) {
    const double sum = std::accumulate(c.weights.begin(), c.weights.end(), 0.0);
    for (double& w : c.weights) w /= std::max(sum, 6.103515625e-5);
  }
  for (double& w : c.weights) w *= r.scale;
  return c;
}

void expect_same(const std::vector<float>& logits, const MoeRouting& r) {
  std::vector<int32_t> experts(r.n_used);
  std::vector<float> weights(r.n_used);
  route_token(logits.data(), r, experts.data(), weights.data());
  const Choice want = naive(logits, r);
  EXPECT_EQ(experts, want.experts);
  for (int32_t j = 0; j < r.n_used; ++j) EXPECT_NEAR(weights[j], want.weights[j], 1e-6 * std::max(1.0, want.weights[j]));
}

TEST(MoeRouting, EachGatingAgreesWithTheNaiveDefinition) {
  std::mt19937 rng(3);
  std::normal_distribution<float> N(0.0f, 2.0f);
  const MoeRouting cases[] = {
      {.n_expert = 8, .n_used = 2, .gating = MoeGating::kSoftmax, .normalize = true},                  // Qwen3-MoE
      {.n_expert = 8, .n_used = 2, .gating = MoeGating::kSoftmax, .normalize = false, .scale = 2.0f},  // DeepSeek-V2
      {.n_expert = 32, .n_used = 4, .gating = MoeGating::kSoftmaxOfChosen},                            // gpt-oss
      {.n_expert = 64, .n_used = 6, .gating = MoeGating::kSigmoid, .normalize = true, .scale = 2.5f},
      {.n_expert = 128, .n_used = 8, .gating = MoeGating::kSoftmax, .normalize = true},
      {.n_expert = 4, .n_used = 4, .gating = MoeGating::kSoftmax},  // every expert
  };
  for (const MoeRouting& r : cases)
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> logits(r.n_expert);
      for (float& z : logits) z = N(rng);
      SCOPED_TRACE(::testing::Message() << r.n_expert << " experts, top " << r.n_used << ", trial " << trial);
      expect_same(logits, r);
    }
}

TEST(MoeRouting, TiesGoToTheLowerIndexAndNaNIsNeverChosen) {
  const MoeRouting r{.n_expert = 6, .n_used = 3, .gating = MoeGating::kSoftmax, .normalize = true};
  expect_same({1.0f, 2.0f, 2.0f, 0.5f, 2.0f, -1.0f}, r);  // experts 1, 2, 4 by index among equals
  std::vector<int32_t> experts(3);
  std::vector<float> weights(3);
  route_token(std::vector<float>{1.0f, 2.0f, 2.0f, 0.5f, 2.0f, -1.0f}.data(), r, experts.data(), weights.data());
  EXPECT_EQ(experts, (std::vector<int32_t>{1, 2, 4}));
  const MoeRouting chosen{.n_expert = 5, .n_used = 2, .gating = MoeGating::kSoftmaxOfChosen};
  std::vector<int32_t> two(2);
  std::vector<float> w2(2);
  route_token(std::vector<float>{NAN, 0.1f, -3.0f, 0.2f, NAN}.data(), chosen, two.data(), w2.data());
  EXPECT_EQ(two, (std::vector<int32_t>{3, 1}));
  EXPECT_NEAR(w2[0] + w2[1], 1.0f, 1e-6f);
  // Weights that sum to nothing are divided by llama.cpp's floor, not by zero.
  const MoeRouting sig{.n_expert = 3, .n_used = 2, .gating = MoeGating::kSigmoid, .normalize = true};
  route_token(std::vector<float>{-100.0f, -100.0f, -200.0f}.data(), sig, two.data(), w2.data());
  EXPECT_TRUE(std::isfinite(w2[0]) && std::isfinite(w2[1]));
}

}  // namespace
}  // namespace kvserve
