// The head-importance search's arithmetic on hand-made measurements: ranking by drop (ties in
// layer/head order), the candidate prefixes a loss budget admits, and the longest prefix whose
// measured joint drop fits.
#include <gtest/gtest.h>

#include "inspect/head_pruning.h"

namespace kvserve {
namespace {

TEST(HeadPruning, RanksByDropWithStableTies) {
  // 2 layers x 2 heads; baseline -2.0.
  const std::vector<HeadDrop> r = rank_heads(-2.0, {-2.5, -2.0, -2.1, -2.0}, 2);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].layer, 0);
  EXPECT_EQ(r[0].head, 0);
  EXPECT_DOUBLE_EQ(r[0].drop, 0.5);
  EXPECT_EQ(r[1].layer, 1);
  EXPECT_EQ(r[1].head, 0);
  EXPECT_NEAR(r[1].drop, 0.1, 1e-12);
  // The two zero drops keep their order: (0,1) before (1,1).
  EXPECT_EQ(r[2].layer, 0);
  EXPECT_EQ(r[2].head, 1);
  EXPECT_EQ(r[3].layer, 1);
  EXPECT_EQ(r[3].head, 1);
}

TEST(HeadPruning, PrefixesStopOneBeyondFourBudgets) {
  // Least important first: drops -0.01 (counted as 0), 0, 0.02, 0.03, 0.5; budget 0.01 -> four
  // budgets = 0.04: the running sums 0, 0, 0.02, 0.05 pass the limit at the fourth candidate,
  // so the first three prefixes and one more are measured.
  const std::vector<HeadDrop> ranked = rank_heads(0.0, {-0.5, -0.03, -0.02, 0.0, 0.01}, 5);
  const auto prefixes = pruning_prefixes(ranked, 0.01);
  ASSERT_EQ(prefixes.size(), 4u);
  EXPECT_EQ(prefixes[0].size(), 1u);
  EXPECT_EQ(prefixes[0][0].head, 4);  // drop -0.01: the least important
  EXPECT_EQ(prefixes[1][0].head, 4);
  EXPECT_EQ(prefixes[1][1].head, 3);
  EXPECT_EQ(prefixes[3].size(), 4u);
  EXPECT_EQ(prefixes[3][3].head, 1);
  // A zero budget with every drop positive: the limit is passed at once; the one candidate
  // after it is still measured.
  EXPECT_EQ(pruning_prefixes(rank_heads(0.0, {-0.3, -0.2, -0.1}, 3), 0.0).size(), 1u);
}

TEST(HeadPruning, LongestPrefixWithinTheBudget) {
  EXPECT_EQ(prunable_count({0.001, 0.004, 0.02, 0.009}, 0.01), 4u);  // the joint drop need not grow
  EXPECT_EQ(prunable_count({0.001, 0.004, 0.02, 0.03}, 0.01), 2u);
  EXPECT_EQ(prunable_count({0.2, 0.3}, 0.01), 0u);
  EXPECT_EQ(prunable_count({}, 0.01), 0u);
}

}  // namespace
}  // namespace kvserve
