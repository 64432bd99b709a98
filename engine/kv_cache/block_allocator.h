// A fixed pool of KV block ids with a free list and reference counts. Knows nothing of
// requests: sequences hold blocks through their block tables, and a block may be held by
// several sequences at once (shared prefixes).
#pragma once

#include <cstdint>
#include <vector>

namespace kvserve {

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  // Takes a free block (reference count 1); -1 when none is free.
  int32_t allocate();
  // Adds a holder to a block that is already held.
  void retain(int32_t block);
  // Drops one holder; the block is free again when none is left.
  void release(int32_t block);

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int32_t num_used() const { return num_blocks() - num_free(); }
  int32_t ref_count(int32_t block) const { return ref_counts_[block]; }

  // True when every block is either free (count 0, on the free list once) or held (count > 0,
  // not on the free list). Used by tests and debug checks.
  bool consistent() const;

 private:
  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
};

}  // namespace kvserve
