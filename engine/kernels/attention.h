// Causal attention over a paged KV cache. Each token of the flat batch attends to the first
// ctx_lens[t] positions of its own sequence, found through that sequence's block table; prompt
// chunks and decode tokens are handled alike. Any ratio of query heads to KV heads (MHA, GQA, MQA).
#pragma once

#include <cstdint>

#include "kernels/attention_args.h"
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
// v and v_cache null: K alone (a latent cache, whose values are part of K's rows).
template <class KvT>
void write_kv(const float* k, const float* v, int64_t rows, int64_t row_stride, const int64_t* slots,
              int n_kv, int head_dim, int block_size, KvT* k_cache, KvT* v_cache);

// q8_0: the same, each token's K and V rows rounded to 8 bits per 32 values (all KV heads side
// by side) with an F16 scale each: k_scales, v_scales: [num_blocks, n_kv·head_dim/32, block_size].
// Rounded are K - k_anchor for every token and V - v_anchor for a token at position 0 (other V
// rows as they are); paged_attention adds the anchors back. k_anchor, v_anchor: [n_kv·head_dim]
// or null (zero); positions: [rows], each token's position in its sequence. v, v_cache and
// v_scales null: K alone.
void write_kv_q8(const float* k, const float* v, int64_t rows, int64_t row_stride, const int64_t* slots,
                 const int32_t* positions, const float* k_anchor, const float* v_anchor, int n_kv, int head_dim,
                 int block_size, int8_t* k_cache, int8_t* v_cache, uint16_t* k_scales, uint16_t* v_scales);

// Shapes in attention_args.h.
template <class KvT>
void paged_attention(const PagedAttentionArgs<KvT>& args);

}  // namespace kvserve::KVSERVE_KERNEL_NS
#endif
