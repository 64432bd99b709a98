// Scratch buffers of the forward pass: grown to the largest step seen and reused, so a step
// allocates nothing once the largest batch has run.
#pragma once

#include <cstddef>
#include <vector>

namespace kvserve {

template <typename T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace kvserve
