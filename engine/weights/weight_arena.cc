#include "weights/weight_arena.h"

#include <algorithm>

namespace kvserve {

uint8_t* WeightArena::allocate(size_t bytes) {
  const size_t need = (bytes + 63) / 64 * 64;
  if (chunks_.empty() || chunk_used_ + need > chunks_.back().size()) {
    chunks_.emplace_back(std::max(kChunk, need), /*prefault=*/false);
    chunk_used_ = 0;
  }
  uint8_t* p = static_cast<uint8_t*>(chunks_.back().data()) + chunk_used_;
  chunk_used_ += need;
  used_ += bytes;
  return p;
}

}  // namespace kvserve
