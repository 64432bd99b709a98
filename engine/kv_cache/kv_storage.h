// The K/V memory itself: one K and one V buffer per place in a layer group (kv_layout.h; every
// layer when all layers form one group; K alone in a latent cache), K as [num_blocks, n_kv, head_dim, block_size]
// (transposed inside each block, see kernels/attention.h) and V as [num_blocks, n_kv,
// block_size, head_dim]. Block b of a group is block b of each of its layers' buffers, so the
// layers of another group read the same buffers through their own block tables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/huge_buffer.h"
#include "kernels/attention_args.h"
#include "kv_cache/kv_layout.h"

namespace kvserve {

struct KvShape {
  int32_t n_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t element_bytes = 4;  // 4: float K/V; 2: _Float16 K/V; 1: q8_0 (int8 values, F16 scales beside)
  // > 0: a latent cache (multi-head latent attention): each K row is the latent and the rotary
  // key, the values are its first v_in_k entries, and there is no V buffer.
  int32_t v_in_k = 0;
  bool q8() const { return element_bytes == 1; }
  int32_t rows_per_token() const { return v_in_k > 0 ? 1 : 2; }  // K and V, or K alone
  // Bytes of 32 values as stored: 128, 64, or 34 (32 int8 and their scale).
  int32_t bytes_per_32() const { return q8() ? 34 : 32 * element_bytes; }
  // 2 (K and V; 1 for a latent cache) · layers · KV heads · head dim · bytes per element (34/32 for q8_0).
  int64_t bytes_per_token() const {
    return int64_t{rows_per_token()} * n_layers * n_kv_heads * head_dim * bytes_per_32() / 32;
  }
  // "4", "2", "34/32": the element size as the logs and GetModelInfo print it.
  std::string element_size() const { return q8() ? "34/32" : std::to_string(element_bytes); }
};

class KvStorage {
 public:
  // layout: how layers share blocks (default, or one of no layers: every layer in one group).
  KvStorage(const KvShape& shape, int32_t block_size, int32_t num_blocks, KvLayout layout = {});

  // The layer's K or V as T (float when element_bytes is 4, _Float16 when it is 2), indexed by
  // the slots of its group's block table.
  template <class T>
  T* k(int layer) { return static_cast<T*>(k_[layout_.layer_index[layer]].data()); }
  // Null in a latent cache (shape().v_in_k > 0).
  template <class T>
  T* v(int layer) { return v_.empty() ? nullptr : static_cast<T*>(v_[layout_.layer_index[layer]].data()); }
  // q8_0: the layer's K or V scales (F16 bits), [num_blocks, n_kv·head_dim / 32, block_size].
  uint16_t* k_scales(int layer) { return static_cast<uint16_t*>(ks_[layout_.layer_index[layer]].data()); }
  uint16_t* v_scales(int layer) { return vs_.empty() ? nullptr : static_cast<uint16_t*>(vs_[layout_.layer_index[layer]].data()); }
  const KvLayout& layout() const { return layout_; }
  bool half() const { return shape_.element_bytes == 2; }
  bool q8() const { return shape_.q8(); }
  const KvShape& shape() const { return shape_; }
  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return num_blocks_; }
  // Positions of every layer the cache holds: num_blocks · block_size with one group.
  int64_t token_capacity() const { return int64_t{num_blocks_} * block_size_ / layout_.n_groups(); }
  // One group's layers, block_size positions.
  int64_t bytes_per_block() const { return shape_.bytes_per_token() / shape_.n_layers * layout_.layers_per_group * block_size_; }
  int64_t total_bytes() const { return bytes_per_block() * num_blocks_; }

 private:
  KvShape shape_;
  KvLayout layout_;
  int32_t block_size_;
  int32_t num_blocks_;
  std::vector<HugeBuffer> k_, v_, ks_, vs_;
};

}  // namespace kvserve
