#include "kernels/attention.h"

#include "kernels/intrinsics.h"

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>


KVSERVE_KERNEL_TARGET_BEGIN
namespace kvserve::KVSERVE_KERNEL_NS {
#include "kernels/vec_math.h"

#include "kernels/attention_blocks.h"
#include "kernels/attention_q8.h"

template <class KvT>
void write_kv(const float* k, const float* v, int64_t rows, int64_t row_stride, const int64_t* slots,
              int n_kv, int head_dim, int block_size, KvT* k_cache, KvT* v_cache) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t block = slots[r] / block_size, off = slots[r] % block_size;
    for (int h = 0; h < n_kv; ++h) {
      const int64_t base = (block * n_kv + h) * block_size * head_dim;
      const float* kr = k + r * row_stride + h * head_dim;
      const float* vr = v_cache ? v + r * row_stride + h * head_dim : nullptr;
      for (int d = 0; d < head_dim; ++d) k_cache[base + int64_t{d} * block_size + off] = static_cast<KvT>(kr[d]);
      if (v_cache)
        for (int d = 0; d < head_dim; ++d) v_cache[base + off * head_dim + d] = static_cast<KvT>(vr[d]);
    }
  }
}


void write_kv_q8(const float* k, const float* v, int64_t rows, int64_t row_stride, const int64_t* slots,
                 const int32_t* positions, const float* k_anchor, const float* v_anchor, int n_kv, int head_dim,
                 int block_size, int8_t* k_cache, int8_t* v_cache, uint16_t* k_scales, uint16_t* v_scales) {
  const int groups = n_kv * head_dim / kKvQ8Group;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t block = slots[r] / block_size, off = slots[r] % block_size;
    const float* v_off = positions[r] == 0 ? v_anchor : nullptr;
    for (int g = 0; g < groups; ++g) {
      int8_t kq[kKvQ8Group], vq[kKvQ8Group];
      float kx[kKvQ8Group], vx[kKvQ8Group];
      for (int i = 0; i < kKvQ8Group; ++i) {
        const int c = g * kKvQ8Group + i;
        kx[i] = k[r * row_stride + c] - (k_anchor ? k_anchor[c] : 0.0f);
        vx[i] = v_cache ? v[r * row_stride + c] - (v_off ? v_off[c] : 0.0f) : 0.0f;
      }
      k_scales[(block * groups + g) * block_size + off] = quantize32(kx, kq);
      if (v_cache) v_scales[(block * groups + g) * block_size + off] = quantize32(vx, vq);
      // Value i of the group is dimension d of KV head h in the row.
      for (int i = 0; i < kKvQ8Group; ++i) {
        const int h = (g * kKvQ8Group + i) / head_dim, d = (g * kKvQ8Group + i) % head_dim;
        const int64_t base = (block * n_kv + h) * block_size * head_dim;
        k_cache[base + int64_t{d} * block_size + off] = kq[i];
        if (v_cache) v_cache[base + off * head_dim + d] = vq[i];
      }
    }
  }
}


namespace {
// A decode row's context is read in chunks of this many positions (rounded down to whole blocks,
// at least one): a work item takes a chunk and a run of KV heads, so it reads every KV head of a
// run of blocks, contiguous bytes, where splitting one row's work by heads alone read a few 2 KB
// slices of each block and left it waiting on memory. The values' weighted sums are kept per
// chunk and added in order, in prompt tiles too, so a row's result does not depend on how its
// work was shared out, nor on whether it came as a decode row or in a prompt's tile.
constexpr int kChunkPositions = 64;

// Row t's scale·q·k for the query heads of KV heads [h0, h1) at positions [block of p0, p1):
// sc[qh · span + position - base], base the first block's start the row sees. scratch: the q8_0
// kernels' (attention_q8.h).
template <class KvT>
void chunk_scores(const PagedAttentionArgs<KvT>& a, int64_t t, int p0, int p1, int h0, int h1, int base, int span,
                  float* sc, std::vector<float>& scratch) {
  const int n_kv = a.n_kv, hd = a.head_dim, bs = a.block_size, group = a.n_head / n_kv;
  const int32_t* table = a.block_tables + static_cast<int64_t>(a.token_seq[t]) * a.max_blocks;
  const float* q = a.q + t * a.q_stride;
  [[maybe_unused]] const int groups = n_kv * hd / kKvQ8Group;
  thread_local std::vector<const float*> qp;  // one KV head's queries and their scores
  thread_local std::vector<float*> sp;
  qp.resize(group), sp.resize(group);
  for (int b0 = p0 / bs * bs; b0 < p1; b0 += bs) {
    const int64_t block = table[b0 / bs];
    const int n = std::min(bs, p1 - b0);
    for (int kvh = h0; kvh < h1; ++kvh) {
      const KvT* kb = a.k_cache + (block * n_kv + kvh) * bs * hd;  // [head_dim, block_size]
      for (int g = 0; g < group; ++g) {
        const int qh = kvh * group + g;
        qp[g] = q + static_cast<int64_t>(qh) * hd;
        sp[g] = sc + static_cast<int64_t>(qh) * span + (b0 - base);
      }
      if constexpr (std::is_same_v<KvT, int8_t>) {
        q8_block_scores_queries(qp.data(), group, kb, a.k_scales + block * bs * groups, kvh, n, hd, bs, a.scale,
                                sp.data(), scratch);
      } else {
        block_scores_queries(qp.data(), group, kb, n, hd, bs, a.scale, sp.data());
      }
    }
  }
}

// One query head's scores of one row, sc[lo, hi) of a row [span] that starts at the first block
// it sees, turned into its softmax weights (q8_0's K anchor added back, the soft cap applied, the
// sink in the denominator); zero outside [lo, hi). qg: the query [head_dim]; kvh: its KV head.
template <class KvT>
void finish_scores(const PagedAttentionArgs<KvT>& a, const float* qg, int kvh, float sink, float* sc, int lo, int hi,
                   int span) {
  if constexpr (std::is_same_v<KvT, int8_t>) {
    if (a.k_anchor) {  // q·(K' + anchor) = q·K' + q·anchor, the same for every position
      const float* an = a.k_anchor + static_cast<int64_t>(kvh) * a.head_dim;
      float c = 0.0f;
      for (int d = 0; d < a.head_dim; ++d) c += qg[d] * an[d];
      c *= a.scale;
      for (int j = lo; j < hi; ++j) sc[j] += c;
    }
  }
  if (a.soft_cap > 0.0f) {
    const float inv = 1.0f / a.soft_cap;
    for (int j = lo; j < hi; ++j) sc[j] = a.soft_cap * std::tanh(sc[j] * inv);
  }
  softmax_inplace(sc + lo, hi - lo, sink);
  std::fill(sc, sc + lo, 0.0f);
  std::fill(sc + hi, sc + span, 0.0f);
}

// Row t's weighted sums of the values at positions [block of p0, p1) for the query heads of KV
// heads [h0, h1), from zero: part[qh · head_dim]. w: the row's weights as chunk_scores laid out.
template <class KvT>
void chunk_values(const PagedAttentionArgs<KvT>& a, int64_t t, int p0, int p1, int h0, int h1, int base, int span,
                  const float* w, float* part, std::vector<float>& scratch) {
  const int n_kv = a.n_kv, hd = a.head_dim, bs = a.block_size, group = a.n_head / n_kv;
  const int32_t* table = a.block_tables + static_cast<int64_t>(a.token_seq[t]) * a.max_blocks;
  [[maybe_unused]] const int groups = n_kv * hd / kKvQ8Group;
  std::fill(part + static_cast<int64_t>(h0) * group * hd, part + static_cast<int64_t>(h1) * group * hd, 0.0f);
  thread_local std::vector<const float*> wp;  // one KV head's weights and their sums
  thread_local std::vector<float*> op;
  wp.resize(group), op.resize(group);
  for (int b0 = p0 / bs * bs; b0 < p1; b0 += bs) {
    const int64_t block = table[b0 / bs];
    const int n = std::min(bs, p1 - b0);
    for (int kvh = h0; kvh < h1; ++kvh) {
      const KvT* vb = a.v_cache + (block * n_kv + kvh) * bs * hd;  // [block_size, head_dim]
      for (int g = 0; g < group; ++g) {
        const int qh = kvh * group + g;
        wp[g] = w + static_cast<int64_t>(qh) * span + (b0 - base);
        op[g] = part + static_cast<int64_t>(qh) * hd;
      }
      if constexpr (std::is_same_v<KvT, int8_t>) {
        q8_block_weighted_sum_queries(wp.data(), group, vb, a.v_scales + block * bs * groups, kvh, n, hd, bs,
                                      op.data(), scratch);
        if (b0 == 0 && a.v_anchor)  // position 0's V is its row plus the anchor
          for (int g = 0; g < group; ++g)
            for (int d = 0; d < hd; ++d) op[g][d] += wp[g][0] * a.v_anchor[static_cast<int64_t>(kvh) * hd + d];
      } else {
        block_weighted_sum_queries(wp.data(), group, vb, n, hd, hd, op.data());
      }
    }
  }
}
}  // namespace

namespace {
// Rows of one sequence attended together: each K and V value a block holds is loaded once for all
// their queries (a prompt chunk's rows; a decode row is a tile of one).
struct AttnTile {
  int64_t t0 = 0;  // first row
  int rows = 1;
};
// One work item: a tile and a run of KV heads [h0, h1).
struct AttnItem {
  int32_t tile = 0;
  int32_t h0 = 0, h1 = 0;
  int32_t chunk = -1;  // a decode row's chunk (kChunkPositions), or -1: the whole context
};
}  // namespace

template <class KvT>
void paged_attention(const PagedAttentionArgs<KvT>& a) {
  const float* q = a.q;
  const int64_t rows = a.rows, q_stride = a.q_stride;
  const KvT *k_cache = a.k_cache, *v_cache = a.v_cache;
  const int32_t *block_tables = a.block_tables, *token_seq = a.token_seq, *ctx_lens = a.ctx_lens;
  const int32_t max_blocks = a.max_blocks;
  const int n_head = a.n_head, n_kv = a.n_kv, head_dim = a.head_dim, block_size = a.block_size;
  const float scale = a.scale;
  float* out = a.out;
  float* const* capture = a.capture;
  const int64_t* capture_head_stride = a.capture_head_stride;
  const int group = n_head / n_kv;
  // A latent cache (v_dim > 0): values are K's first v_dim entries, read from K's slices.
  const bool v_in_k = a.v_dim > 0;
  const int vd = v_in_k ? a.v_dim : head_dim;
  const int64_t out_stride = static_cast<int64_t>(n_head) * vd;
  [[maybe_unused]] const int64_t slice_bytes = static_cast<int64_t>(block_size) * head_dim * sizeof(KvT);
  // Tiles: up to kMaxQueries / group consecutive rows of one sequence whose contexts lie close
  // (a prompt chunk's), so that one load of a K or V value feeds every query of the tile's rows
  // and GQA group: prompt attention then runs at the FMA units' pace, where one row at a time
  // spent a load and a conversion per FMA. Every other row (decode) is a tile of its own.
  const int tile_cap = v_in_k ? 1 : std::max(1, kMaxQueries / group);
  thread_local std::vector<AttnTile> tiles;
  thread_local std::vector<AttnItem> items;
  tiles.clear();
  items.clear();
  int64_t single_rows = 0;
  for (int64_t t = 0; t < rows;) {
    int r = 1;
    while (t + r < rows && token_seq[t + r] == token_seq[t]) {
      if (r == tile_cap || std::abs(ctx_lens[t + r] - ctx_lens[t]) >= 2 * tile_cap) break;
      ++r;
    }
    tiles.push_back({t, r});
    single_rows += r == 1;
    t += r;
  }
  // Work items. A tile of several rows takes one KV head, heads outermost: a thread's next item is
  // then mostly the same head's next rows, whose K/V slices are still in its cache. A single row
  // takes a run of KV heads: a block holds its KV heads' slices side by side, so an item that
  // takes several heads block by block reads one contiguous run per block, which the hardware
  // prefetchers follow (scattered 2 KB slices left decode attention latency-bound); runs are as
  // long as still gives each thread two items. The latent cache keeps one head an item, so that
  // a q8_0 one's converted slices serve a prompt's rows one after another (Q8Slices).
  const int threads = omp_get_max_threads();
  const bool one_head = v_in_k;
  const int64_t want_items = 2 * static_cast<int64_t>(threads);
  const int n_tiles = static_cast<int>(tiles.size());
  for (int h = 0; h < n_kv; ++h)
    for (int i = 0; i < n_tiles; ++i)
      if (tiles[i].rows > 1) items.push_back({i, h, h + 1});
  // Too few decode rows (tiles of one row) to give each thread two go by chunks of their context:
  // each item a chunk and a run of KV heads, first for the scores (chunk_scores), then, once every
  // row's softmax is done, for the values (chunk_values), the chunks' sums added in order at the
  // end. Enough rows are items of a whole row each (every KV head of a block, a row's blocks in
  // turn: one long read where a fresh pool laid them out in order), as are all rows where
  // attention is captured or the cache is latent. For decode tile i: slot_of[i], its first chunk
  // among the partial sums; score_at[i], where its scores start.
  const bool chunked = !v_in_k && !capture && single_rows < want_items;
  const int chunk = std::max(1, kChunkPositions / block_size) * block_size;
  auto start_of_row = [&](int64_t t) { return a.window > 0 ? std::max(0, ctx_lens[t] - a.window) : 0; };
  auto base_of_row = [&](int64_t t) { return start_of_row(t) / block_size * block_size; };
  auto chunks_of_row = [&](int64_t t) { return (ctx_lens[t] - 1) / chunk - start_of_row(t) / chunk + 1; };
  thread_local std::vector<int64_t> chunk_slot, score_start;
  chunk_slot.assign(tiles.size(), -1);
  score_start.assign(tiles.size(), 0);
  int64_t n_slots = 0, n_scores = 0;
  if (chunked)
    for (int i = 0; i < n_tiles; ++i)
      if (tiles[i].rows == 1) {
        const int64_t t = tiles[i].t0;
        chunk_slot[i] = n_slots, score_start[i] = n_scores;
        n_slots += chunks_of_row(t);
        n_scores += int64_t{n_head} * (ctx_lens[t] - base_of_row(t));
      }
  const int64_t units = chunked ? n_slots : single_rows;  // what the heads' runs are shared out over
  const int run = one_head ? 1
                  : units >= want_items ? n_kv
                                        : std::max<int>(1, static_cast<int>(n_kv * units / want_items));
  if (!chunked)
    for (int h0 = 0; h0 < n_kv; h0 += run)
      for (int i = 0; i < n_tiles; ++i)
        if (tiles[i].rows == 1) items.push_back({i, h0, std::min(n_kv, h0 + run)});
  const int64_t first_chunk_item = static_cast<int64_t>(items.size());
  if (chunked)
    for (int i = 0; i < n_tiles; ++i)
      if (tiles[i].rows == 1)
        for (int c = start_of_row(tiles[i].t0) / chunk, last = (ctx_lens[tiles[i].t0] - 1) / chunk; c <= last; ++c)
          for (int h0 = 0; h0 < n_kv; h0 += run) items.push_back({i, h0, std::min(n_kv, h0 + run), c});
  thread_local std::vector<float> row_scores, partials;  // [n_head, span] a row; [slot, n_head, head_dim]
  if (row_scores.size() < static_cast<size_t>(n_scores)) row_scores.resize(static_cast<size_t>(n_scores));
  const int64_t part_stride = int64_t{n_head} * head_dim;
  if (partials.size() < static_cast<size_t>(n_slots * part_stride))
    partials.resize(static_cast<size_t>(n_slots * part_stride));
  float* const part_base = partials.data();
  float* const score_base = row_scores.data();
  const int64_t* const slot_of = chunk_slot.data();
  const int64_t* const score_at = score_start.data();
  const AttnTile* tile_list = tiles.data();
  const AttnItem* item_list = items.data();
  const int64_t n_items = static_cast<int64_t>(items.size());
#pragma omp parallel
  {
    // [heads of the run, tile rows · group, span]: one per thread, kept across calls (the pool's
    // threads live on), so a step allocates nothing once the longest context has been seen.
    thread_local std::vector<float> scores;
    thread_local std::vector<const float*> qp, wp;  // the queries (weights) of one KV head
    thread_local std::vector<float*> sp, op;        // their scores (outputs)
    thread_local Q8Slices q8;  // q8_0 slices as floats, for a prompt's tiles or a latent cache's rows
    [[maybe_unused]] const int groups = n_kv * head_dim / kKvQ8Group;
    if constexpr (std::is_same_v<KvT, int8_t>) q8.start(block_size * head_dim);
    thread_local std::vector<float> q8_scratch;  // the q8_0 kernels' scales and scaled weights
    thread_local std::vector<float> vpart;     // a tile's weighted values of one chunk [heads, queries, vd]
#pragma omp for schedule(dynamic, 1)
    for (int64_t it = 0; it < n_items; ++it) {
      const AttnTile tile = tile_list[item_list[it].tile];
      if (const int c = item_list[it].chunk; c >= 0) {  // a decode row's chunk: its scores
        const int64_t t = tile.t0;
        const int base = base_of_row(t);
        chunk_scores(a, t, std::max(c * chunk, start_of_row(t)), std::min((c + 1) * chunk, ctx_lens[t]),
                     item_list[it].h0, item_list[it].h1, base, ctx_lens[t] - base,
                     score_base + score_at[item_list[it].tile], q8_scratch);
        continue;
      }
      const int h0 = item_list[it].h0, h1 = item_list[it].h1, nh = h1 - h0, R = tile.rows, nq = R * group;
      const int64_t t0 = tile.t0;
      // Row i sees positions start_of(i)..ctx_lens[t0 + i]-1. The tile's scores run from the start
      // of the first block a row sees (base) to the longest context (end); each row's outside its
      // own positions are set to zero after its softmax.
      auto start_of = [&](int i) { return start_of_row(t0 + i); };
      int base = ctx_lens[t0], end = 0;
      for (int i = 0; i < R; ++i) {
        base = std::min(base, start_of(i) / block_size * block_size);
        end = std::max(end, ctx_lens[t0 + i]);
      }
      const int span = end - base;
      const int32_t* table = block_tables + static_cast<int64_t>(token_seq[t0]) * max_blocks;
      if (scores.size() < static_cast<size_t>(nh) * nq * span) scores.resize(static_cast<size_t>(nh) * nq * span);
      if (qp.size() < static_cast<size_t>(nq)) qp.resize(nq), wp.resize(nq), sp.resize(nq), op.resize(nq);
      // Query head g of KV head kvh in row i: its query, scores and output.
      auto q_of = [&](int i, int kvh, int g) {
        return q + (t0 + i) * q_stride + (static_cast<int64_t>(kvh) * group + g) * head_dim;
      };
      auto sc_of = [&](int i, int kvh, int g) {
        return scores.data() + ((static_cast<size_t>(kvh - h0) * R + i) * group + g) * span;
      };
      auto out_of = [&](int i, int kvh, int g) {
        return out + (t0 + i) * out_stride + (static_cast<int64_t>(kvh) * group + g) * vd;
      };
      // q8_0: a tile of several rows, or a latent cache's row, reads slices kept as floats (the
      // same bits as from the int8 values); a decode row reads the cache.
      [[maybe_unused]] const bool keep = R > 1 || v_in_k;
      if constexpr (std::is_same_v<KvT, int8_t>)
        if (keep) q8.select(table, h0);

      // A block's run of slices is requested kAhead blocks ahead: one block's work is shorter
      // than a trip to memory, and the blocks lie anywhere. K's are followed by V's first,
      // read after the softmax.
      [[maybe_unused]] const int first = base / block_size, blocks = (end - 1) / block_size + 1 - first;
      [[maybe_unused]] const int ahead = std::max(1, kSlicesAhead / nh);
      [[maybe_unused]] auto request = [&]([[maybe_unused]] int i) {  // run i: K of block first + i, then V
#if KVSERVE_HAS_AVX512
        if (i < blocks)
          prefetch_slice(k_cache + (table[first + i] * n_kv + h0) * block_size * head_dim, nh * slice_bytes);
        else if (i < 2 * blocks && !v_in_k)
          prefetch_slice(v_cache + (table[first + i - blocks] * n_kv + h0) * block_size * head_dim, nh * slice_bytes);
#endif
      };
      for (int i = 1; i < ahead; ++i) request(i);
      for (int p0 = base; p0 < end; p0 += block_size) {
        const int64_t block = table[p0 / block_size];
        const int n = std::min(block_size, end - p0);
        request((p0 - base) / block_size + ahead);
        for (int kvh = h0; kvh < h1; ++kvh) {
          for (int i = 0; i < R; ++i)
            for (int g = 0; g < group; ++g) {
              qp[i * group + g] = q_of(i, kvh, g);
              sp[i * group + g] = sc_of(i, kvh, g) + (p0 - base);
            }
          const KvT* kb = k_cache + (block * n_kv + kvh) * block_size * head_dim;  // [head_dim, block_size]
          if constexpr (std::is_same_v<KvT, int8_t>) {
            const uint16_t* ks = a.k_scales + block * block_size * groups;
            if (keep)
              q8_block_scores_queries(qp.data(), nq, q8.k(p0 / block_size, kb), ks, kvh, n, head_dim, block_size,
                                      scale, sp.data(), q8_scratch);
            else
              q8_block_scores_queries(qp.data(), nq, kb, ks, kvh, n, head_dim, block_size, scale, sp.data(),
                                      q8_scratch);
          } else {
            block_scores_queries(qp.data(), nq, kb, n, head_dim, block_size, scale, sp.data());
          }
        }
      }
      for (int kvh = h0; kvh < h1; ++kvh)
        for (int i = 0; i < R; ++i)
          for (int g = 0; g < group; ++g) {
            const int64_t t = t0 + i;
            const int hi = ctx_lens[t] - base;
            float* sc = sc_of(i, kvh, g);
            finish_scores(a, q_of(i, kvh, g), kvh, a.sinks ? a.sinks[kvh * group + g] : -INFINITY, sc,
                          start_of(i) - base, hi, span);
            if (capture && capture[t]) {
              float* c = capture[t] + (static_cast<int64_t>(kvh) * group + g) * capture_head_stride[t];
              std::fill(c, c + base, 0.0f);
              std::copy(sc, sc + hi, c + base);
            }
            float* o = out_of(i, kvh, g);
            std::fill(o, o + vd, 0.0f);
          }
      if (v_in_k) {  // one head and one row an item (one_head, tile_cap)
        const int kvh = h0;
        for (int p0 = base; p0 < end; p0 += block_size) {
          const int64_t block = table[p0 / block_size];
          const KvT* kb = k_cache + (block * n_kv + kvh) * block_size * head_dim;  // [head_dim, block_size]
          const int n = std::min(block_size, end - p0);
          for (int g = 0; g < group; ++g) {
            const float* w = sc_of(0, kvh, g) + (p0 - base);
            if constexpr (std::is_same_v<KvT, int8_t>)
              q8_block_weighted_sum_t(w, q8.k(p0 / block_size, kb), a.k_scales + block * block_size * groups, kvh, n,
                                      vd, head_dim, block_size, out_of(0, kvh, g), q8_scratch);
            else
              block_weighted_sum_t(w, kb, n, vd, block_size, out_of(0, kvh, g));
          }
        }
        if constexpr (std::is_same_v<KvT, int8_t>) {
          if (a.k_anchor)  // every row's values came from K - anchor: add Σw · anchor back
            for (int g = 0; g < group; ++g) {
              const float* sc = sc_of(0, kvh, g);
              float wsum = 0.0f;
              for (int j = 0; j < span; ++j) wsum += sc[j];
              const float* an = a.k_anchor + static_cast<int64_t>(kvh) * head_dim;
              float* o = out_of(0, kvh, g);
              for (int d = 0; d < vd; ++d) o[d] += wsum * an[d];
            }
        }
        continue;
      }
      // The values' weighted sums per chunk of positions (kChunkPositions), each from zero and
      // added to the output at the chunk's end, as decode rows sum theirs.
      if (vpart.size() < static_cast<size_t>(nh) * nq * vd) vpart.resize(static_cast<size_t>(nh) * nq * vd);
      auto part_of = [&](int kvh, int j) { return vpart.data() + (static_cast<size_t>(kvh - h0) * nq + j) * vd; };
      for (int p0 = base; p0 < end; p0 += block_size) {
        const int64_t block = table[p0 / block_size];
        const int n = std::min(block_size, end - p0);
        request(blocks + (p0 - base) / block_size + ahead);
        if (p0 == base || p0 % chunk == 0) std::fill_n(vpart.data(), static_cast<size_t>(nh) * nq * vd, 0.0f);
        for (int kvh = h0; kvh < h1; ++kvh) {
          for (int i = 0; i < R; ++i)
            for (int g = 0; g < group; ++g) {
              wp[i * group + g] = sc_of(i, kvh, g) + (p0 - base);
              op[i * group + g] = part_of(kvh, i * group + g);
            }
          const KvT* vb = v_cache + (block * n_kv + kvh) * block_size * head_dim;  // [block_size, head_dim]
          if constexpr (std::is_same_v<KvT, int8_t>) {
            const uint16_t* vs = a.v_scales + block * block_size * groups;
            if (keep)
              q8_block_weighted_sum_queries(wp.data(), nq, q8.v(p0 / block_size, vb), vs, kvh, n, head_dim,
                                            block_size, op.data(), q8_scratch);
            else
              q8_block_weighted_sum_queries(wp.data(), nq, vb, vs, kvh, n, head_dim, block_size, op.data(),
                                            q8_scratch);
            if (p0 == 0 && a.v_anchor)  // position 0's V is its row plus the anchor
              for (int j = 0; j < nq; ++j) {
                const float w = wp[j][0];
                const float* an = a.v_anchor + static_cast<int64_t>(kvh) * head_dim;
                for (int d = 0; d < head_dim; ++d) op[j][d] += w * an[d];
              }
          } else {
            block_weighted_sum_queries(wp.data(), nq, vb, n, head_dim, head_dim, op.data());
          }
        }
        if (p0 + block_size >= end || (p0 + block_size) % chunk == 0)
          for (int kvh = h0; kvh < h1; ++kvh)
            for (int i = 0; i < R; ++i)
              for (int g = 0; g < group; ++g) {
                const float* part = part_of(kvh, i * group + g);
                float* o = out_of(i, kvh, g);
                for (int d = 0; d < vd; ++d) o[d] += part[d];
              }
      }
    }
    // Decode rows: each query head's softmax, then the chunks' weighted values, then their sums
    // in order (the loops' barriers between).
    if (n_slots > 0) {
      const int64_t n_pairs = static_cast<int64_t>(n_tiles) * n_head;
#pragma omp for schedule(static)
      for (int64_t j = 0; j < n_pairs; ++j) {
        const int i = static_cast<int>(j / n_head), qh = static_cast<int>(j % n_head);
        if (slot_of[i] < 0) continue;
        const int64_t t = tile_list[i].t0;
        const int base = base_of_row(t), span = ctx_lens[t] - base;
        finish_scores(a, q + t * q_stride + int64_t{qh} * head_dim, qh / group, a.sinks ? a.sinks[qh] : -INFINITY,
                      score_base + score_at[i] + int64_t{qh} * span, start_of_row(t) - base, span, span);
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t it = first_chunk_item; it < n_items; ++it) {
        const AttnItem& item = item_list[it];
        const int64_t t = tile_list[item.tile].t0;
        const int base = base_of_row(t);
        const int64_t slot = slot_of[item.tile] + item.chunk - start_of_row(t) / chunk;
        chunk_values(a, t, std::max(item.chunk * chunk, start_of_row(t)), std::min((item.chunk + 1) * chunk, ctx_lens[t]),
                     item.h0, item.h1, base, ctx_lens[t] - base, score_base + score_at[item.tile],
                     part_base + slot * part_stride, q8_scratch);
      }
#pragma omp for schedule(static)
      for (int64_t j = 0; j < n_pairs; ++j) {
        const int i = static_cast<int>(j / n_head), qh = static_cast<int>(j % n_head);
        if (slot_of[i] < 0) continue;
        const int64_t t = tile_list[i].t0;
        float* o = out + t * out_stride + int64_t{qh} * vd;
        std::fill(o, o + vd, 0.0f);
        for (int c = 0, nc = chunks_of_row(t); c < nc; ++c) {
          const float* part = part_base + (slot_of[i] + c) * part_stride + int64_t{qh} * head_dim;
          for (int d = 0; d < head_dim; ++d) o[d] += part[d];
        }
      }
    }
  }
}

template void write_kv<float>(const float*, const float*, int64_t, int64_t, const int64_t*, int, int, int, float*,
                              float*);
template void write_kv<_Float16>(const float*, const float*, int64_t, int64_t, const int64_t*, int, int, int,
                                 _Float16*, _Float16*);
template void paged_attention<float>(const PagedAttentionArgs<float>&);
template void paged_attention<_Float16>(const PagedAttentionArgs<_Float16>&);
template void paged_attention<int8_t>(const PagedAttentionArgs<int8_t>&);

}  // namespace kvserve::KVSERVE_KERNEL_NS
KVSERVE_KERNEL_TARGET_END
