#include "kv_cache/block_table.h"

#include <algorithm>

namespace kvserve {

bool BlockTable::grow_to(int64_t n_tokens, BlockAllocator& alloc) {
  int32_t need = blocks_needed(n_tokens);
  if (need > alloc.num_free()) return false;
  for (int32_t i = 0; i < need; ++i) blocks_.push_back(alloc.allocate());
  return true;
}

void BlockTable::release_all(BlockAllocator& alloc) {
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it)
    if (*it != kReleased) alloc.release(*it);
  blocks_.clear();
  released_ = 0;
}

int32_t BlockTable::truncate(int64_t n_tokens, BlockAllocator& alloc) {
  const int64_t keep = std::max<int64_t>((n_tokens + block_size_ - 1) / block_size_, released_);
  int32_t n = 0;
  for (; static_cast<int64_t>(blocks_.size()) > keep; ++n) {
    alloc.release(blocks_.back());
    blocks_.pop_back();
  }
  return n;
}

int32_t BlockTable::release_before(int64_t position, BlockAllocator& alloc) {
  const int64_t dead = std::min<int64_t>(position / block_size_, static_cast<int64_t>(blocks_.size()));
  int32_t n = 0;
  for (; released_ < dead; ++released_, ++n) {
    alloc.release(blocks_[released_]);
    blocks_[released_] = kReleased;
  }
  return n;
}

}  // namespace kvserve
