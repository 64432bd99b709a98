#include "kv_cache/block_table.h"

namespace kvserve {

bool BlockTable::grow_to(int64_t n_tokens, BlockAllocator& alloc) {
  int32_t need = blocks_needed(n_tokens);
  if (need > alloc.num_free()) return false;
  for (int32_t i = 0; i < need; ++i) blocks_.push_back(alloc.allocate());
  return true;
}

void BlockTable::release_all(BlockAllocator& alloc) {
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) alloc.release(*it);
  blocks_.clear();
}

}  // namespace kvserve
