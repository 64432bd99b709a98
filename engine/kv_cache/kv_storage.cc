#include "kv_cache/kv_storage.h"

#include <algorithm>
#include <stdexcept>

namespace kvserve {

KvStorage::KvStorage(const KvShape& shape, int32_t block_size, int32_t num_blocks)
    : shape_(shape), block_size_(block_size), num_blocks_(num_blocks) {
  if (block_size <= 0 || num_blocks <= 0) throw std::invalid_argument("KvStorage: empty cache");
  const size_t per_layer = static_cast<size_t>(num_blocks) * shape.n_kv_heads * block_size * shape.head_dim;
  for (int l = 0; l < shape.n_layers; ++l) {
    k_.emplace_back(per_layer * sizeof(float));
    v_.emplace_back(per_layer * sizeof(float));
  }
}

void KvStorage::copy_block(int32_t src, int32_t dst) {
  const size_t n = static_cast<size_t>(shape_.n_kv_heads) * block_size_ * shape_.head_dim;
  for (int l = 0; l < shape_.n_layers; ++l) {
    std::copy_n(k_[l].floats() + src * n, n, k_[l].floats() + dst * n);
    std::copy_n(v_[l].floats() + src * n, n, v_[l].floats() + dst * n);
  }
}

}  // namespace kvserve
