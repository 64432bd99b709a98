// Memory for weights held as the file stores them: slices of a few large huge-page mappings,
// so that a model of many small matrices does not round each up to a 2 MiB page. Pages become
// resident as the weights are copied in; what is never written costs nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/huge_buffer.h"

namespace kvserve {

class WeightArena {
 public:
  // A 64-byte-aligned slice of `bytes`, valid as long as the arena.
  uint8_t* allocate(size_t bytes);
  size_t bytes_used() const { return used_; }

 private:
  static constexpr size_t kChunk = size_t{64} << 20;
  std::vector<HugeBuffer> chunks_;
  size_t chunk_used_ = 0;  // bytes taken from the last chunk
  size_t used_ = 0;
};

}  // namespace kvserve
