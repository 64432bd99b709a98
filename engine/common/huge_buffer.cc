#include "common/huge_buffer.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

namespace kvserve {
namespace {
constexpr size_t kHuge = size_t{2} << 20;
}  // namespace

HugeBuffer::HugeBuffer(size_t bytes, bool prefault) : bytes_(bytes) {
  if (bytes == 0) return;
  const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
  map_bytes_ = rounded + kHuge;  // room to align the start to a huge page
  map_ = mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (map_ == MAP_FAILED) {
    map_ = nullptr;
    throw std::bad_alloc();
  }
  const uintptr_t start = (reinterpret_cast<uintptr_t>(map_) + kHuge - 1) / kHuge * kHuge;
  data_ = reinterpret_cast<void*>(start);
  madvise(data_, rounded, MADV_HUGEPAGE);  // advisory: without THP it is plain memory
  if (prefault) std::memset(data_, 0, rounded);
}

HugeBuffer::~HugeBuffer() { release(); }

HugeBuffer::HugeBuffer(HugeBuffer&& o) noexcept { *this = std::move(o); }

HugeBuffer& HugeBuffer::operator=(HugeBuffer&& o) noexcept {
  if (this != &o) {
    release();
    map_ = std::exchange(o.map_, nullptr);
    map_bytes_ = std::exchange(o.map_bytes_, 0);
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

void HugeBuffer::release() {
  if (map_) munmap(map_, map_bytes_);
  map_ = nullptr;
}

}  // namespace kvserve
