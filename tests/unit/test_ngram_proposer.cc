// Prompt-lookup proposals against a naive reference written here (every suffix length, every
// earlier start, compared token by token), on random sequences over small alphabets (so that
// suffixes recur) and on hand-made cases.
#include <gtest/gtest.h>

#include <random>

#include "speculative/ngram_proposer.h"

namespace kvserve {
namespace {

// The longest n in [lo, hi] whose suffix occurs at an earlier start; the latest such start;
// the up to k tokens after it.
std::vector<int32_t> naive(const std::vector<int32_t>& t, int lo, int hi, int k) {
  const int size = static_cast<int>(t.size());
  for (int n = hi; n >= lo; --n) {
    if (n >= size) continue;
    int found = -1;
    for (int start = 0; start + n < size; ++start) {
      bool same = true;
      for (int j = 0; j < n; ++j) same = same && t[start + j] == t[size - n + j];
      if (same) found = start;
    }
    if (found >= 0) {
      std::vector<int32_t> out;
      for (int j = found + n; j < size && static_cast<int>(out.size()) < k; ++j) out.push_back(t[j]);
      return out;
    }
  }
  return {};
}

TEST(NgramProposer, MatchesTheNaiveReference) {
  std::mt19937 rng(3);
  std::vector<int32_t> out;
  int proposed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int alphabet = 2 + static_cast<int>(rng() % 6), len = static_cast<int>(rng() % 60);
    std::vector<int32_t> t(len);
    for (auto& x : t) x = static_cast<int32_t>(rng() % alphabet);
    const int lo = 1 + static_cast<int>(rng() % 3), hi = lo + static_cast<int>(rng() % 4);
    const int k = 1 + static_cast<int>(rng() % 6);
    propose_ngram(t, {lo, hi}, k, out);
    EXPECT_EQ(out, naive(t, lo, hi, k)) << "trial " << trial;
    proposed += !out.empty();
  }
  EXPECT_GT(proposed, 1000);
}

TEST(NgramProposer, HandMadeCases) {
  std::vector<int32_t> out = {99};
  // "a b c d ... a b" proposes "c d".
  propose_ngram(std::vector<int32_t>{1, 2, 3, 4, 5, 1, 2}, {2, 4}, 2, out);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 4}));
  // The longer match wins over a more recent shorter one.
  propose_ngram(std::vector<int32_t>{7, 1, 2, 3, 9, 2, 4, 7, 1, 2}, {1, 3}, 1, out);
  EXPECT_EQ(out, (std::vector<int32_t>{3}));
  // Nothing recurs: nothing proposed (and the old contents are gone).
  propose_ngram(std::vector<int32_t>{1, 2, 3, 4}, {1, 3}, 3, out);
  EXPECT_TRUE(out.empty());
  // A run of one token overlaps its own suffix.
  propose_ngram(std::vector<int32_t>{5, 5, 5, 5}, {2, 2}, 4, out);
  EXPECT_EQ(out, (std::vector<int32_t>{5}));
  propose_ngram(std::vector<int32_t>{1, 2}, {1, 1}, 0, out);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace kvserve
