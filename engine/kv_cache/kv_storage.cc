#include "kv_cache/kv_storage.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace kvserve {

KvStorage::KvStorage(const KvShape& shape, int32_t block_size, int32_t num_blocks, KvLayout layout)
    : shape_(shape), layout_(layout.n_layers() ? std::move(layout) : KvLayout::single(shape.n_layers)),
      block_size_(block_size), num_blocks_(num_blocks) {
  if (layout_.n_layers() != shape.n_layers) throw std::invalid_argument("KvStorage: layout of another layer count");
  if (block_size <= 0 || num_blocks <= 0) throw std::invalid_argument("KvStorage: empty cache");
  if (shape.element_bytes != 4 && shape.element_bytes != 2 && shape.element_bytes != 1)
    throw std::invalid_argument("KvStorage: K/V elements are 4 (f32), 2 (f16) or 1 (q8_0) bytes");
  const int64_t row = int64_t{shape.n_kv_heads} * shape.head_dim;
  if (shape.v_in_k < 0 || shape.v_in_k > shape.head_dim || (shape.v_in_k > 0 && shape.n_kv_heads != 1))
    throw std::invalid_argument("KvStorage: a latent cache has one row per token whose first v_in_k values are V");
  if (shape.q8() && row % kKvQ8Group != 0)
    throw std::invalid_argument("KvStorage: q8_0 needs KV heads x head dim to be a multiple of 32");
  const size_t per_layer = static_cast<size_t>(num_blocks) * block_size * row * shape.element_bytes;
  const size_t scales = shape.q8() ? static_cast<size_t>(num_blocks) * block_size * (row / kKvQ8Group) * 2 : 0;
  for (int l = 0; l < layout_.layers_per_group; ++l) {  // one buffer per place in a group
    k_.emplace_back(per_layer);
    if (shape.v_in_k == 0) v_.emplace_back(per_layer);
    if (scales) {
      ks_.emplace_back(scales);
      if (shape.v_in_k == 0) vs_.emplace_back(scales);
    }
  }
}

}  // namespace kvserve
