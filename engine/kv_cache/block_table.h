// One sequence's map from logical KV blocks (position / block_size) to physical block ids.
#pragma once

#include <cstdint>
#include <vector>

#include "kv_cache/block_allocator.h"

namespace kvserve {

class BlockTable {
 public:
  explicit BlockTable(int32_t block_size) : block_size_(block_size) {}

  // Blocks still to allocate so that positions [0, n_tokens) have a slot.
  int32_t blocks_needed(int64_t n_tokens) const {
    int64_t total = (n_tokens + block_size_ - 1) / block_size_;
    return total > static_cast<int64_t>(blocks_.size()) ? static_cast<int32_t>(total - blocks_.size()) : 0;
  }
  // Allocates what blocks_needed says; false (and nothing allocated) if the pool runs short.
  bool grow_to(int64_t n_tokens, BlockAllocator& alloc);
  // Adds a block this sequence now holds (a cached prefix block it retained).
  void append(int32_t block) { blocks_.push_back(block); }
  // Adds an entry for a block it need not hold (behind its window), before any it holds.
  void append_released() {
    blocks_.push_back(kReleased);
    ++released_;
  }
  // Releases every block back to the allocator.
  void release_all(BlockAllocator& alloc);
  // Releases the trailing blocks no position below n_tokens falls in (those grown for
  // speculative tokens that were rejected); returns how many.
  int32_t truncate(int64_t n_tokens, BlockAllocator& alloc);
  // Releases the blocks wholly before `position` (a sliding window has left them behind: no
  // later token reads them); their entries become kReleased. Returns how many were released.
  int32_t release_before(int64_t position, BlockAllocator& alloc);
  static constexpr int32_t kReleased = -1;
  // Blocks still held (the entries not released).
  int32_t held() const { return static_cast<int32_t>(blocks_.size()) - released_; }

  // The physical slot (block · block_size + offset) of a position already covered (and not
  // released).
  int64_t slot(int64_t position) const {
    return static_cast<int64_t>(blocks_[position / block_size_]) * block_size_ + position % block_size_;
  }
  const std::vector<int32_t>& blocks() const { return blocks_; }
  int32_t block_size() const { return block_size_; }

 private:
  int32_t block_size_;
  std::vector<int32_t> blocks_;
  int32_t released_ = 0;  // the first released_ entries are kReleased
};

}  // namespace kvserve
