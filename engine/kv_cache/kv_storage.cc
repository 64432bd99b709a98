#include "kv_cache/kv_storage.h"

#include <algorithm>
#include <stdexcept>

namespace kvserve {

KvStorage::KvStorage(const KvShape& shape, int32_t block_size, int32_t num_blocks)
    : shape_(shape), block_size_(block_size), num_blocks_(num_blocks) {
  if (block_size <= 0 || num_blocks <= 0) throw std::invalid_argument("KvStorage: empty cache");
  if (shape.element_bytes != 4 && shape.element_bytes != 2)
    throw std::invalid_argument("KvStorage: K/V elements are 4 (f32) or 2 (f16) bytes");
  const size_t per_layer =
      static_cast<size_t>(num_blocks) * shape.n_kv_heads * block_size * shape.head_dim * shape.element_bytes;
  for (int l = 0; l < shape.n_layers; ++l) {
    k_.emplace_back(per_layer);
    v_.emplace_back(per_layer);
  }
}

}  // namespace kvserve
