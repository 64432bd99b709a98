// Causal attention over a paged KV cache. Each token of the flat batch attends to the first
// ctx_lens[t] positions of its own sequence, found through that sequence's block table; prompt
// chunks and decode tokens are handled alike. Any ratio of query heads to KV heads (MHA, GQA, MQA).
#pragma once

#include <cstdint>

#include "kernels/kernel_level.h"

#ifdef KVSERVE_KERNEL_NS
namespace kvserve::KVSERVE_KERNEL_NS {

// Cache layout of one layer. K is stored transposed inside each block so that the scores of a
// block's positions come out of plain vector FMAs (no horizontal sums):
//   K: [num_blocks, n_kv, head_dim, block_size]     V: [num_blocks, n_kv, block_size, head_dim]

// KvT, the cache's element type: float, or _Float16 (converted on store and on load).

// Stores each token's K and V rows at its slot (block · block_size + offset).
// k, v: [rows, row_stride] with n_kv·head_dim values from column 0; slots: [rows].
// k_cache: [num_blocks, n_kv, head_dim, block_size]; v_cache: [num_blocks, n_kv, block_size, head_dim].
template <class KvT>
void write_kv(const float* k, const float* v, int64_t rows, int64_t row_stride, const int64_t* slots,
              int n_kv, int head_dim, int block_size, KvT* k_cache, KvT* v_cache);

// q: [rows, q_stride] with n_head·head_dim values from column 0.
// k_cache: [num_blocks, n_kv, head_dim, block_size]; v_cache: [num_blocks, n_kv, block_size, head_dim].
// block_tables: [n_seqs, max_blocks]; token_seq: [rows] row of block_tables for each token;
// ctx_lens: [rows] number of cached positions each token sees (its position + 1).
// out: [rows, n_head·head_dim].
// capture (may be null): [rows] pointers, each null or the place for that token's attention
// probabilities: head h's ctx_lens[t] weights go to capture[t] + h·capture_head_stride[t].
template <class KvT>
void paged_attention(const float* q, int64_t rows, int64_t q_stride, const KvT* k_cache,
                     const KvT* v_cache, const int32_t* block_tables, int32_t max_blocks,
                     const int32_t* token_seq, const int32_t* ctx_lens, int n_head, int n_kv,
                     int head_dim, int block_size, float scale, float* out,
                     float* const* capture = nullptr, const int64_t* capture_head_stride = nullptr);

}  // namespace kvserve::KVSERVE_KERNEL_NS
#endif
