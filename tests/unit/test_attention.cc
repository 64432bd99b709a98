// The paged attention kernel against naive dense causal attention, with block tables that are
// shuffled and non-contiguous, mixed prompt chunks and decode tokens, and head ratios 1, 2, 8;
// with sliding windows and Gemma 2's soft cap.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>
#include <vector>

#include <bit>
#include <type_traits>

#include "kernels/kernel_table.h"
#include "kv_cache/kv_storage.h"

namespace kvserve {
namespace {

struct Shape {
  int n_head, n_kv, head_dim, block_size;
};

// Every shape on every kernel level this CPU runs, each against the same dense reference.
class PagedAttention : public ::testing::TestWithParam<std::tuple<Shape, KernelLevel>> {};

// KvT: the cache's element type. The reference uses the K and V the cache actually holds (for
// _Float16, the inputs rounded to half precision; for int8_t, q8_0, what the int8 values and
// their scales decode to, each within half a step of the input), so the tolerance stays tight.
// window, soft_cap: PagedAttentionArgs's (0: none). With a window, the blocks of each sequence
// wholly before every batch token's window are swapped for a block of NaN: reading them shows.
// seq_len: the sequences' lengths; chunk: how many of each one's last tokens are in the batch.
// sinks: per-head logits that join each softmax's denominator (gpt-oss), or empty.
// v_dim > 0: a latent cache (one KV head): no V is written or given, each position's value is
// the first v_dim entries of its K row. check_capture: every row's attention probabilities are
// captured (attention inspection) and checked against the reference's too.
template <class KvT>
void check_against_dense(const Shape& shape, const KernelTable& k, int window = 0, float soft_cap = 0.0f,
                         const std::vector<int>& seq_len = {37, 5, 64}, const std::vector<int>& chunk = {1, 5, 9},
                         const std::vector<float>& sinks = {}, int v_dim = 0, bool check_capture = false) {
  const auto [n_head, n_kv, hd, bs] = shape;
  const int vd = v_dim > 0 ? v_dim : hd;
  constexpr bool q8 = std::is_same_v<KvT, int8_t>;
  const int groups = n_kv * hd / kKvQ8Group;
  if (q8 && n_kv * hd % kKvQ8Group != 0) return;  // q8_0 needs rows of whole blocks of 32
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  // By default three sequences of different lengths; from each, a chunk of its last tokens is "in
  // the batch": a decode, a whole prompt, a prompt chunk.
  const int longest = *std::max_element(seq_len.begin(), seq_len.end());
  int needed = 1;  // the poison block
  for (int L : seq_len) needed += (L + bs - 1) / bs;
  const int num_blocks = std::max(128, needed);
  std::vector<int32_t> free_blocks(num_blocks);
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);

  const int max_blocks = (longest + bs - 1) / bs;
  std::vector<int32_t> tables(seq_len.size() * max_blocks, -1);
  const size_t cache_n = static_cast<size_t>(num_blocks) * n_kv * bs * hd;
  std::vector<KvT> kc(cache_n, static_cast<KvT>(q8 ? 0 : NAN)), vc(cache_n, static_cast<KvT>(q8 ? 0 : NAN));  // NaN: reading an unwritten slot shows
  // q8_0 scales start as NaN (F16 0x7e00): an unwritten slot shows there.
  std::vector<uint16_t> ks(q8 ? static_cast<size_t>(num_blocks) * bs * groups : 0, 0x7e00), vs(ks.size(), 0x7e00);
  std::vector<std::vector<float>> K(seq_len.size()), V(seq_len.size()), Q(seq_len.size());
  size_t next_block = 0;
  std::vector<int32_t> token_seq, ctx;
  std::vector<float> q_rows;
  // q8_0's anchors (write_kv_q8 rounds K - k_anchor, and V - v_anchor at position 0): offsets
  // of up to 3 per channel, as K's channels carry, that attention must add back.
  std::vector<float> k_anchor(static_cast<size_t>(n_kv) * hd), v_anchor(k_anchor.size());
  for (auto& x : k_anchor) x = 3.0f * U(rng);
  for (auto& x : v_anchor) x = 3.0f * U(rng);
  for (size_t s = 0; s < seq_len.size(); ++s) {
    const int L = seq_len[s];
    for (int b = 0; b * bs < L; ++b) tables[s * max_blocks + b] = free_blocks[next_block++];
    K[s].resize(static_cast<size_t>(L) * n_kv * hd);
    V[s].resize(K[s].size());
    Q[s].resize(static_cast<size_t>(L) * n_head * hd);
    for (auto& x : K[s]) x = U(rng);
    for (auto& x : V[s]) x = U(rng);
    for (auto& x : Q[s]) x = U(rng);
    std::vector<int64_t> slots;
    for (int p = 0; p < L; ++p) slots.push_back(int64_t{tables[s * max_blocks + p / bs]} * bs + p % bs);
    if constexpr (q8) {
      for (int p = 0; p < L; ++p)
        for (int i = 0; i < n_kv * hd; ++i) K[s][size_t(p) * n_kv * hd + i] += k_anchor[i];
      std::vector<int32_t> positions(L);
      std::iota(positions.begin(), positions.end(), 0);
      k.write_kv_q8(K[s].data(), v_dim ? nullptr : V[s].data(), L, int64_t{n_kv} * hd, slots.data(), positions.data(),
                    k_anchor.data(), v_anchor.data(), n_kv, hd, bs, kc.data(), v_dim ? nullptr : vc.data(), ks.data(),
                    v_dim ? nullptr : vs.data());
      // What the cache holds, decoded with the anchors added back; each value within half a
      // quantization step of its input.
      for (int p = 0; p < L; ++p) {
        const int64_t block = slots[p] / bs, off = slots[p] % bs;
        for (int h = 0; h < n_kv; ++h)
          for (int i = 0; i < hd; ++i) {
            const int g = (h * hd + i) / kKvQ8Group;
            const float dk = static_cast<float>(std::bit_cast<_Float16>(ks[(block * groups + g) * bs + off]));
            const float dv = static_cast<float>(std::bit_cast<_Float16>(vs[(block * groups + g) * bs + off]));
            const int64_t base = (block * n_kv + h) * bs * hd;
            float& kx = K[s][(size_t(p) * n_kv + h) * hd + i];
            float& vx = V[s][(size_t(p) * n_kv + h) * hd + i];
            const float kd = kc[base + int64_t{i} * bs + off] * dk + k_anchor[h * hd + i];
            const float vd = vc[base + off * hd + i] * dv + (p == 0 ? v_anchor[h * hd + i] : 0.0f);
            ASSERT_LE(std::fabs(kd - kx), dk * 0.5f + 1e-6f);
            kx = kd;
            if (v_dim) continue;  // no V rows: the values are K's
            ASSERT_LE(std::fabs(vd - vx), dv * 0.5f + 1e-6f);
            vx = vd;
          }
      }
    } else {
      k.write_kv(kc.data())(K[s].data(), v_dim ? nullptr : V[s].data(), L, int64_t{n_kv} * hd, slots.data(), n_kv, hd,
                            bs, kc.data(), v_dim ? nullptr : vc.data());
      // From here on the reference sees what the cache holds.
      for (auto& x : K[s]) x = static_cast<float>(static_cast<KvT>(x));
      for (auto& x : V[s]) x = static_cast<float>(static_cast<KvT>(x));
    }
    for (int p = L - chunk[s]; p < L; ++p) {
      token_seq.push_back(static_cast<int32_t>(s));
      ctx.push_back(p + 1);
      q_rows.insert(q_rows.end(), Q[s].begin() + static_cast<size_t>(p) * n_head * hd,
                    Q[s].begin() + static_cast<size_t>(p + 1) * n_head * hd);
    }
  }
  if (window > 0) {
    const int32_t poison = free_blocks.back();  // never written: NaN (q8_0: NaN scales)
    for (size_t s = 0; s < seq_len.size(); ++s) {
      const int first_seen = std::max(0, seq_len[s] - chunk[s] + 1 - window);
      for (int b = 0; (b + 1) * bs <= first_seen; ++b) tables[s * max_blocks + b] = poison;
    }
  }
  const int64_t rows = static_cast<int64_t>(token_seq.size());
  std::vector<float> out(rows * n_head * vd);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<std::vector<float>> captured(check_capture ? rows : 0);
  std::vector<float*> capture_ptrs;
  std::vector<int64_t> capture_strides;
  for (int64_t r = 0; r < static_cast<int64_t>(captured.size()); ++r) {
    captured[r].assign(static_cast<size_t>(n_head) * ctx[r], NAN);
    capture_ptrs.push_back(captured[r].data());
    capture_strides.push_back(ctx[r]);
  }
  k.paged_attention(PagedAttentionArgs<KvT>{.q = q_rows.data(), .rows = rows, .q_stride = int64_t{n_head} * hd,
                                           .k_cache = kc.data(), .v_cache = v_dim ? nullptr : vc.data(),
                                           .block_tables = tables.data(),
                                           .max_blocks = max_blocks, .token_seq = token_seq.data(),
                                           .ctx_lens = ctx.data(), .n_head = n_head, .n_kv = n_kv, .head_dim = hd,
                                           .block_size = bs, .scale = scale, .window = window,
                                           .soft_cap = soft_cap, .sinks = sinks.empty() ? nullptr : sinks.data(),
                                           .v_dim = v_dim, .out = out.data(),
                                           .capture = check_capture ? capture_ptrs.data() : nullptr,
                                           .capture_head_stride = check_capture ? capture_strides.data() : nullptr,
                                           .k_scales = q8 ? ks.data() : nullptr,
                                           .v_scales = q8 && !v_dim ? vs.data() : nullptr,
                                           .k_anchor = q8 ? k_anchor.data() : nullptr,
                                           .v_anchor = q8 && !v_dim ? v_anchor.data() : nullptr});

  for (int64_t r = 0; r < rows; ++r) {
    const int s = token_seq[r], p = ctx[r] - 1;
    for (int h = 0; h < n_head; ++h) {
      const int kh = h / (n_head / n_kv);
      const int first = window > 0 ? std::max(0, p - window + 1) : 0;
      std::vector<double> w(p + 1, 0.0);
      double mx = -1e300, sum = 0;
      for (int u = first; u <= p; ++u) {
        double dot = 0;
        for (int i = 0; i < hd; ++i)
          dot += double(Q[s][(size_t(p) * n_head + h) * hd + i]) * K[s][(size_t(u) * n_kv + kh) * hd + i];
        w[u] = dot * scale;
        if (soft_cap > 0) w[u] = soft_cap * std::tanh(w[u] / soft_cap);
        mx = std::max(mx, w[u]);
      }
      if (!sinks.empty()) {  // the sink's exp(logit) joins the denominator alone
        mx = std::max(mx, double(sinks[h]));
        sum = std::exp(sinks[h] - mx);
      }
      for (int u = first; u <= p; ++u) sum += (w[u] = std::exp(w[u] - mx));
      if (check_capture) {
        for (int u = 0; u <= p; ++u)
          ASSERT_NEAR(captured[r][size_t(h) * ctx[r] + u], w[u] / sum, 1e-6) << "row " << r << " head " << h;
      }
      const std::vector<float>& values = v_dim ? K[s] : V[s];
      for (int i = 0; i < vd; ++i) {
        double ref = 0;
        for (int u = first; u <= p; ++u) ref += w[u] / sum * values[(size_t(u) * n_kv + kh) * hd + i];
        ASSERT_NEAR(out[(r * n_head + h) * vd + i], ref, 1e-5) << "row " << r << " head " << h;
      }
    }
  }
}

TEST_P(PagedAttention, MatchesDenseCausalAttention) {
  check_against_dense<float>(std::get<0>(GetParam()), kernel_table(std::get<1>(GetParam())));
}
TEST_P(PagedAttention, HalfCacheMatchesDenseOnTheRoundedKV) {
  check_against_dense<_Float16>(std::get<0>(GetParam()), kernel_table(std::get<1>(GetParam())));
}
TEST_P(PagedAttention, Q8CacheMatchesDenseOnTheRoundedKV) {
  const Shape& s = std::get<0>(GetParam());
  if (s.n_kv * s.head_dim % kKvQ8Group != 0) GTEST_SKIP() << "q8_0 needs K/V rows of whole blocks of 32";
  check_against_dense<int8_t>(std::get<0>(GetParam()), kernel_table(std::get<1>(GetParam())));
}

// Decode batches of few sequences: each work item takes a run of KV heads shorter than all of
// them (on 2 threads, 6 rows of 4 or 3 KV heads make runs of 3 + 1 or 2 + 1 heads), block by
// block; the same dense reference, with and without a window.
TEST_P(PagedAttention, FewDecodeRowsTakeRunsOfHeads) {
  const Shape& s = std::get<0>(GetParam());
  const KernelTable& k = kernel_table(std::get<1>(GetParam()));
  for (const std::vector<int>& lens : {std::vector<int>{37, 5, 64, 20, 9, 50}, std::vector<int>{70, 3}}) {
    const std::vector<int> ones(lens.size(), 1);
    check_against_dense<float>(s, k, 0, 0.0f, lens, ones);
    check_against_dense<_Float16>(s, k, 0, 0.0f, lens, ones);
    check_against_dense<_Float16>(s, k, 24, 0.0f, lens, ones);
    check_against_dense<int8_t>(s, k, 0, 0.0f, lens, ones);
  }
}

// Decode rows whose contexts span several chunks of 64 positions (each chunk's softmax partial
// kept, then the chunks combined): windows that start inside a chunk and inside a block, sinks,
// a soft cap, every cache type; a one-position row beside them.
TEST_P(PagedAttention, LongDecodeRowsCombineTheirChunks) {
  const Shape& s = std::get<0>(GetParam());
  const KernelTable& k = kernel_table(std::get<1>(GetParam()));
  const std::vector<int> lens = {300, 129, 128, 65, 64, 1};
  const std::vector<int> ones(lens.size(), 1);
  std::vector<float> sinks(s.n_head);
  for (int h = 0; h < s.n_head; ++h) sinks[h] = h % 2 ? -1.0f : 2.0f;
  for (int window : {0, 5, 100}) {
    check_against_dense<float>(s, k, window, 0.0f, lens, ones, sinks);
    check_against_dense<_Float16>(s, k, window, 0.5f, lens, ones);
    check_against_dense<int8_t>(s, k, window, 0.0f, lens, ones, sinks);
  }
}

// A row's output does not depend on the work around it: the last row of a 200-position sequence
// alone and among few other decode rows (items of chunks), among many (items of whole rows),
// with attention captured (items of whole rows), and (with GQA, whose query heads share every
// kernel call) as the last row of its prompt's tile of 8 rows: the same bits each time, as
// batched output equal to solo output needs. With and without a window that starts inside a
// chunk, with sinks and a soft cap.
template <class KvT>
void check_row_invariance(const Shape& shape, const KernelTable& k, int window) {
  const auto [n_head, n_kv, hd, bs] = shape;
  const std::vector<int> lens = {200, 90, 131};
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> U(-1.0f, 1.0f);
  int max_blocks = 0, num_blocks = 0;
  for (int L : lens) max_blocks = std::max(max_blocks, (L + bs - 1) / bs), num_blocks += (L + bs - 1) / bs;
  std::vector<int32_t> order(num_blocks);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<int32_t> tables(lens.size() * max_blocks, -1);
  const size_t cache_n = static_cast<size_t>(num_blocks) * n_kv * bs * hd;
  std::vector<KvT> kc(cache_n), vc(cache_n);
  constexpr bool q8 = std::is_same_v<KvT, int8_t>;
  if (q8 && n_kv * hd % kKvQ8Group != 0) return;  // q8_0 needs rows of whole blocks of 32
  std::vector<uint16_t> ks(q8 ? static_cast<size_t>(num_blocks) * bs * n_kv * hd / kKvQ8Group : 0), vs(ks.size());
  std::vector<float> k_anchor(static_cast<size_t>(n_kv) * hd), v_anchor(k_anchor.size());
  for (auto* v : {&k_anchor, &v_anchor})
    for (float& x : *v) x = 2.0f * U(rng);
  std::vector<std::vector<float>> Q(lens.size());
  int next = 0;
  for (size_t s = 0; s < lens.size(); ++s) {
    const int L = lens[s];
    for (int b = 0; b * bs < L; ++b) tables[s * max_blocks + b] = order[next++];
    std::vector<float> K(static_cast<size_t>(L) * n_kv * hd), V(K.size());
    Q[s].resize(static_cast<size_t>(L) * n_head * hd);
    for (auto* v : {&K, &V, &Q[s]})
      for (float& x : *v) x = U(rng);
    std::vector<int64_t> slots;
    for (int p = 0; p < L; ++p) slots.push_back(int64_t{tables[s * max_blocks + p / bs]} * bs + p % bs);
    if constexpr (q8) {
      std::vector<int32_t> positions(L);
      std::iota(positions.begin(), positions.end(), 0);
      k.write_kv_q8(K.data(), V.data(), L, int64_t{n_kv} * hd, slots.data(), positions.data(), k_anchor.data(),
                    v_anchor.data(), n_kv, hd, bs, kc.data(), vc.data(), ks.data(), vs.data());
    } else {
      k.write_kv(kc.data())(K.data(), V.data(), L, int64_t{n_kv} * hd, slots.data(), n_kv, hd, bs, kc.data(),
                            vc.data());
    }
  }
  std::vector<float> sinks(n_head);
  for (int h = 0; h < n_head; ++h) sinks[h] = h % 2 ? -1.0f : 1.5f;
  // Rows (sequence, position); returns the output of row `which` (-1: the last one).
  auto run = [&](const std::vector<std::pair<int, int>>& rows, bool capture, int which = -1) {
    std::vector<int32_t> token_seq, ctx;
    std::vector<float> q;
    std::vector<std::vector<float>> cap(rows.size());
    std::vector<float*> cap_ptrs;
    std::vector<int64_t> cap_strides;
    for (const auto& [s, p] : rows) {
      token_seq.push_back(s);
      ctx.push_back(p + 1);
      q.insert(q.end(), Q[s].begin() + static_cast<size_t>(p) * n_head * hd,
               Q[s].begin() + static_cast<size_t>(p + 1) * n_head * hd);
    }
    for (size_t r = 0; r < rows.size(); ++r) {
      cap[r].resize(static_cast<size_t>(n_head) * ctx[r]);
      cap_ptrs.push_back(cap[r].data());
      cap_strides.push_back(ctx[r]);
    }
    std::vector<float> out(rows.size() * n_head * hd);
    k.paged_attention(PagedAttentionArgs<KvT>{.q = q.data(), .rows = static_cast<int64_t>(rows.size()),
                                             .q_stride = int64_t{n_head} * hd, .k_cache = kc.data(),
                                             .v_cache = vc.data(), .block_tables = tables.data(),
                                             .max_blocks = max_blocks, .token_seq = token_seq.data(),
                                             .ctx_lens = ctx.data(), .n_head = n_head, .n_kv = n_kv, .head_dim = hd,
                                             .block_size = bs, .scale = 0.3f, .window = window, .soft_cap = 2.0f,
                                             .sinks = sinks.data(), .out = out.data(),
                                             .capture = capture ? cap_ptrs.data() : nullptr,
                                             .capture_head_stride = capture ? cap_strides.data() : nullptr,
                                             .k_scales = q8 ? ks.data() : nullptr,
                                             .v_scales = q8 ? vs.data() : nullptr,
                                             .k_anchor = q8 ? k_anchor.data() : nullptr,
                                             .v_anchor = q8 ? v_anchor.data() : nullptr});
    const size_t w = which < 0 ? rows.size() - 1 : static_cast<size_t>(which);
    return std::vector<float>(out.begin() + w * n_head * hd, out.begin() + (w + 1) * n_head * hd);
  };
  const std::vector<float> alone = run({{0, 199}}, false);
  EXPECT_EQ(run({{1, 89}, {2, 130}, {0, 199}}, false), alone) << "among other decode rows";
  // As many rows as make whole-row items on up to 8 threads.
  std::vector<std::pair<int, int>> many;
  for (int r = 0; r < 16; ++r) many.push_back({1 + r % 2, 20 + 4 * r});  // within both sequences (90, 131)
  many.push_back({0, 199});
  EXPECT_EQ(run(many, false), alone) << "among many decode rows";
  EXPECT_EQ(run({{0, 199}}, true), alone) << "captured";
  if (n_head / n_kv >= 2) {
    std::vector<std::pair<int, int>> tile;
    for (int p = 192; p < 200; ++p) tile.push_back({0, p});
    EXPECT_EQ(run(tile, false), alone) << "in a prompt tile";
    // The tile's other rows see fewer positions than their tile reads (their last block partly).
    for (int i = 0; i + 1 < static_cast<int>(tile.size()); ++i)
      EXPECT_EQ(run(tile, false, i), run({tile[i]}, false)) << "row " << i << " of a prompt tile";
  }
}

TEST_P(PagedAttention, ARowsOutputDoesNotDependOnTheWorkAroundIt) {
  const Shape& s = std::get<0>(GetParam());
  const KernelTable& k = kernel_table(std::get<1>(GetParam()));
  for (int window : {0, 70}) {
    check_row_invariance<float>(s, k, window);
    check_row_invariance<_Float16>(s, k, window);
    check_row_invariance<int8_t>(s, k, window);
  }
}

// Prompt chunks attended in tiles of rows (up to 8 queries a KV head each, one load of a K or V
// value for all): whole prompts, chunks whose length is no multiple of a tile, beside decode
// rows; with a window whose start differs across a tile's rows, sinks and captured weights.
TEST_P(PagedAttention, PromptChunksAttendInTilesOfRows) {
  const Shape& s = std::get<0>(GetParam());
  const KernelTable& k = kernel_table(std::get<1>(GetParam()));
  const std::vector<int> lens = {70, 33, 16, 41, 9}, chunks = {70, 20, 3, 1, 9};
  std::vector<float> sinks(s.n_head);
  for (int h = 0; h < s.n_head; ++h) sinks[h] = h % 2 ? -1.0f : 0.5f;
  for (int window : {0, 11}) {
    check_against_dense<float>(s, k, window, 0.0f, lens, chunks, {}, 0, true);
    check_against_dense<_Float16>(s, k, window, 0.0f, lens, chunks, sinks, 0, true);
    check_against_dense<int8_t>(s, k, window, 0.0f, lens, chunks, {}, 0, true);
  }
  check_against_dense<float>(s, k, 0, 0.5f, lens, chunks, sinks);
}

// Long q8_0 sequences: 33,000 positions (prompt rows in tiles, decode rows by chunks), and a
// latent cache's 8,000, longer than the decoded blocks a thread keeps for a prompt's rows
// (Q8Slices: 2^18 floats, 409 blocks of 16 positions x 40 dimensions), whose later blocks are
// decoded per row into the spare entry.
TEST_P(PagedAttention, Q8CacheLongerThanTheKeptBlocks) {
  const Shape& s = std::get<0>(GetParam());
  const KernelTable& k = kernel_table(std::get<1>(GetParam()));
  if (s.n_kv * s.head_dim == 32 && s.block_size == 4)
    check_against_dense<int8_t>(s, k, 0, 0.0f, {33000, 40}, {3, 40});
  else if (s.n_kv == 1 && s.head_dim == 40)
    check_against_dense<int8_t>(s, k, 0, 0.0f, {8000, 40}, {3, 40}, {}, s.head_dim - 8);
  else
    GTEST_SKIP() << "run on the one 8-wide shape and the latent one";
}

// A sliding window of 7 (not a whole number of blocks) and a soft cap that bends the scores.
TEST_P(PagedAttention, SlidingWindowAndSoftCapMatchDense) {
  const KernelTable& k = kernel_table(std::get<1>(GetParam()));
  check_against_dense<float>(std::get<0>(GetParam()), k, 7, 0.5f);
  check_against_dense<_Float16>(std::get<0>(GetParam()), k, 7, 0.0f);
  check_against_dense<float>(std::get<0>(GetParam()), k, 0, 0.5f);
  check_against_dense<int8_t>(std::get<0>(GetParam()), k, 20, 0.5f);  // returns at once for rows not of whole q8_0 blocks
}

// Attention sinks (gpt-oss): per head a logit with no value joins the softmax's denominator;
// some below every score, some far above it (the head then attends to almost nothing), with a
// window and in every cache type.
TEST_P(PagedAttention, SinksJoinTheDenominator) {
  const KernelTable& k = kernel_table(std::get<1>(GetParam()));
  const int n_head = std::get<0>(GetParam()).n_head;
  std::vector<float> sinks(n_head);
  for (int h = 0; h < n_head; ++h) sinks[h] = h % 3 == 0 ? -2.0f : h % 3 == 1 ? 0.3f : 6.0f;
  check_against_dense<float>(std::get<0>(GetParam()), k, 0, 0.0f, {37, 5, 64}, {1, 5, 9}, sinks);
  check_against_dense<float>(std::get<0>(GetParam()), k, 7, 0.0f, {37, 5, 64}, {1, 5, 9}, sinks);
  check_against_dense<_Float16>(std::get<0>(GetParam()), k, 0, 0.0f, {37, 5, 64}, {1, 5, 9}, sinks);
  check_against_dense<int8_t>(std::get<0>(GetParam()), k, 0, 0.0f, {37, 5, 64}, {1, 5, 9}, sinks);
}

// A latent cache (multi-head latent attention): one KV head whose K rows hold the latent, then
// the rotary key; the values are the latent, read from K's rows (no V cache exists). Every cache
// type, with a window, and (q8_0) K's anchor added back to the values too.
TEST_P(PagedAttention, LatentCacheValuesAreTheFirstEntriesOfKRows) {
  const Shape& s = std::get<0>(GetParam());
  if (s.n_kv != 1) GTEST_SKIP() << "a latent cache has one KV head";
  const KernelTable& k = kernel_table(std::get<1>(GetParam()));
  const int v_dim = s.head_dim - 8;
  check_against_dense<float>(s, k, 0, 0.0f, {37, 5, 64}, {1, 5, 9}, {}, v_dim);
  check_against_dense<float>(s, k, 7, 0.0f, {37, 5, 64}, {1, 5, 9}, {}, v_dim);
  check_against_dense<_Float16>(s, k, 0, 0.0f, {37, 5, 64}, {1, 5, 9}, {}, v_dim);
  check_against_dense<int8_t>(s, k, 0, 0.0f, {37, 5, 64}, {1, 5, 9}, {}, v_dim);  // returns for rows not of whole blocks
}

INSTANTIATE_TEST_SUITE_P(HeadRatios, PagedAttention,
                         ::testing::Combine(::testing::Values(Shape{4, 4, 16, 16},   // MHA
                                           Shape{8, 4, 8, 4},     // GQA 2:1
                                           Shape{8, 1, 32, 8},    // MQA 8:1
                                           Shape{16, 1, 40, 16},  // a latent cache's shape: 32 latent + 8 rotary
                                           Shape{16, 2, 64, 16},  // GQA 8:1
                                           Shape{4, 2, 64, 16},   // GQA 2:1, tiles of 4 rows in blocks of 16
                                           Shape{6, 3, 12, 1},    // block size 1
                                           Shape{4, 2, 128, 16},  // two 64-wide output chunks
                                           Shape{2, 2, 80, 32},   // a 64-wide chunk, a 16-wide one, 2 lanes groups
                                           Shape{3, 3, 66, 16}),  // head_dim not a multiple of 4 or 16
                                            ::testing::ValuesIn(supported_levels())),
                         [](const auto& i) {
                           // (std::ostringstream: GCC 12 warns falsely on chained string +)
                           const Shape& s = std::get<0>(i.param);
                           std::ostringstream name;
                           name << "h" << s.n_head << "kv" << s.n_kv << "hd" << s.head_dim << "bs" << s.block_size << "_"
                                << level_name(std::get<1>(i.param));
                           return name.str();
                         });

}  // namespace
}  // namespace kvserve
