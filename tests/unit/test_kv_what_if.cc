// The KV what-if arithmetic against values computed by hand for stories260K (5 layers, 8 heads,
// 4 KV heads, head dim 8, F32) and for a Llama-2-7B shape.
#include <gtest/gtest.h>

#include "kv_cache/kv_what_if.h"

namespace kvserve {
namespace {

TEST(KvWhatIf, Stories260KByHand) {
  // Budget: 512 blocks of 16 tokens at 1,280 bytes per token as it is.
  const int64_t budget = int64_t{512} * 16 * 1280;
  auto v = kv_what_if({5, 8, 4, 8, 4, 16, 2048, budget});
  // GQA-8 is not listed: 8 KV heads for 8 query heads is MHA.
  ASSERT_EQ(v.size(), 6u);
  const std::vector<std::pair<std::string, int64_t>> want = {{"as is", 1280}, {"MHA", 2560}, {"GQA-2", 640},
                                                             {"GQA-4", 1280}, {"MQA", 320},
                                                             {"MLA", (4 * 8 + 64) * 5 * 4}};  // 1,920
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(v[i].name, want[i].first);
    EXPECT_EQ(v[i].bytes_per_token, want[i].second) << want[i].first;
  }
  EXPECT_EQ(v[0].token_capacity, 8192);
  EXPECT_DOUBLE_EQ(v[0].max_concurrency, 4.0);
  EXPECT_EQ(v[1].token_capacity, 4096);   // MHA: half the tokens
  EXPECT_EQ(v[4].token_capacity, 32768);  // MQA: four times
  EXPECT_EQ(v[5].token_capacity, budget / (1920 * 16) * 16);
  EXPECT_EQ(v[4].n_kv_heads, 1);
  EXPECT_EQ(v[5].n_kv_heads, 0);
}

// Six heads: two KV heads divide them (GQA-2; three would too, but is not a standard row), four
// and eight do not, so those rows are left out.
TEST(KvWhatIf, OnlyGroupingsTheHeadsAllow) {
  auto v = kv_what_if({6, 6, 6, 48, 4, 16, 2048, int64_t{1} << 30});
  std::vector<std::string> names;
  for (const auto& x : v) names.push_back(x.name);
  EXPECT_EQ(names, (std::vector<std::string>{"as is", "MHA", "GQA-2", "MQA", "MLA"}));
}

TEST(KvWhatIf, Llama2SevenBShape) {
  // 32 layers, 32 heads of 128, F32: 1 MiB per token; 4 GiB holds 4,096 tokens, 2 at 2k.
  auto v = kv_what_if({32, 32, 32, 128, 4, 16, 2048, int64_t{4} << 30});
  EXPECT_EQ(v[0].bytes_per_token, 1 << 20);
  EXPECT_EQ(v[0].token_capacity, 4096);
  EXPECT_DOUBLE_EQ(v[0].max_concurrency, 2.0);
  EXPECT_EQ(v[4].bytes_per_token, (1 << 20) / 4);  // GQA-8
  EXPECT_EQ(v[6].bytes_per_token, (512 + 64) * 32 * 4);  // MLA latent 4·128 + 64
}

}  // namespace
}  // namespace kvserve
