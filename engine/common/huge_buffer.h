// A zeroed, page-aligned buffer that asks for transparent huge pages (madvise mode is the
// common kernel default). The KV cache and the packed weights are read across hundreds of MB
// every step; on 4 KiB pages those reads wait on TLB misses (each (block, head) slice of the
// cache is its own page), on 2 MiB pages they do not.
#pragma once

#include <cstddef>

namespace kvserve {

class HugeBuffer {
 public:
  HugeBuffer() = default;
  // Maps `bytes` (rounded up to 2 MiB), faulted in now so that resident memory does not creep
  // up as the cache fills (prefault false: pages become resident as they are first written);
  // throws std::bad_alloc when the mapping fails.
  explicit HugeBuffer(size_t bytes, bool prefault = true);
  ~HugeBuffer();
  HugeBuffer(HugeBuffer&& other) noexcept;
  HugeBuffer& operator=(HugeBuffer&& other) noexcept;
  HugeBuffer(const HugeBuffer&) = delete;
  HugeBuffer& operator=(const HugeBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  void release();
  void* map_ = nullptr;    // what mmap returned
  size_t map_bytes_ = 0;
  void* data_ = nullptr;   // 2 MiB-aligned inside it
  size_t bytes_ = 0;
};

}  // namespace kvserve
