#include "kv_cache/block_allocator.h"

#include <stdexcept>
#include <string>

namespace kvserve {

BlockAllocator::BlockAllocator(int32_t num_blocks) : ref_counts_(num_blocks, 0) {
  if (num_blocks <= 0) throw std::invalid_argument("BlockAllocator: num_blocks must be positive");
  free_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

int32_t BlockAllocator::allocate() {
  if (free_.empty()) return -1;
  int32_t b = free_.back();
  free_.pop_back();
  ref_counts_[b] = 1;
  return b;
}

void BlockAllocator::retain(int32_t block) {
  if (ref_counts_.at(block) <= 0)
    throw std::logic_error("retain of free KV block " + std::to_string(block));
  ++ref_counts_[block];
}

void BlockAllocator::release(int32_t block) {
  if (ref_counts_.at(block) <= 0)
    throw std::logic_error("release of free KV block " + std::to_string(block));
  if (--ref_counts_[block] == 0) free_.push_back(block);
}

bool BlockAllocator::consistent() const {
  std::vector<int> on_free_list(ref_counts_.size(), 0);
  for (int32_t b : free_) {
    if (b < 0 || b >= num_blocks() || on_free_list[b]++) return false;
  }
  for (size_t b = 0; b < ref_counts_.size(); ++b) {
    if (ref_counts_[b] < 0) return false;
    if ((ref_counts_[b] == 0) != (on_free_list[b] == 1)) return false;
  }
  return true;
}

}  // namespace kvserve
