// The arguments of paged attention, as one struct (shared by every kernel level).
#pragma once

#include <cstdint>

namespace kvserve {

// 32 values of each token's K (and V) row, all KV heads side by side, share one F16 scale in a
// q8_0 cache, as in llama.cpp's --cache-type-k q8_0: 34 bytes per 32 values.
constexpr int32_t kKvQ8Group = 32;

// KvT: the cache's element type (float, _Float16, or int8_t for q8_0 with the scales below).
template <class KvT>
struct PagedAttentionArgs {
  const float* q = nullptr;          // [rows, q_stride] with n_head·head_dim values from column 0
  int64_t rows = 0;
  int64_t q_stride = 0;
  const KvT* k_cache = nullptr;      // [num_blocks, n_kv, head_dim, block_size]
  const KvT* v_cache = nullptr;      // [num_blocks, n_kv, block_size, head_dim]; null when v_dim > 0
  const int32_t* block_tables = nullptr;  // [n_seqs, max_blocks]
  int32_t max_blocks = 0;
  const int32_t* token_seq = nullptr;  // [rows] row of block_tables for each token
  const int32_t* ctx_lens = nullptr;   // [rows] cached positions each token sees (its position + 1)
  int n_head = 0, n_kv = 0, head_dim = 0, block_size = 0;
  float scale = 1.0f;                // applied to q·k
  // Sliding window: a token at position p sees positions p - window + 1 .. p only; 0 sees all.
  // Blocks wholly before a token's window are never read (they may have been released).
  int window = 0;
  float soft_cap = 0.0f;             // > 0: each scaled score s becomes soft_cap · tanh(s / soft_cap)
  // [n_head] or null: head h's softmax denominator gains exp(sinks[h]) (gpt-oss's attention
  // sinks: a logit with no value, so a head may attend to nothing).
  const float* sinks = nullptr;
  // > 0: each position's value is the first v_dim entries of its K row and there is no V cache
  // (multi-head latent attention's cache, model/mla_attention.h); out is then [rows, n_head·v_dim].
  int v_dim = 0;
  float* out = nullptr;              // [rows, n_head·head_dim]
  // May be null: [rows] pointers, each null or the place for that token's attention
  // probabilities: head h's ctx_lens[t] weights go to capture[t] + h·capture_head_stride[t].
  float* const* capture = nullptr;
  const int64_t* capture_head_stride = nullptr;
  // q8_0 only: F16 scales of each 32 values of a token's K and V rows (all KV heads side by side),
  // [num_blocks, n_kv·head_dim / 32, block_size] (a group's scales of a block's positions together).
  const uint16_t* k_scales = nullptr;
  const uint16_t* v_scales = nullptr;
  // q8_0 only, each [n_kv·head_dim] or null: what write_kv_q8 took off before rounding (K of
  // every token, V of position 0's), added back here.
  const float* k_anchor = nullptr;
  const float* v_anchor = nullptr;
};

}  // namespace kvserve
