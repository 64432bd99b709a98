// Writing GGUF version 3 files: metadata in insertion order, then tensors whose bytes are
// produced one at a time by a callback, so a multi-gigabyte model never sits in memory whole.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gguf/gguf.h"

namespace kvserve {

class GgufWriter {
 public:
  // Fills `out` (exactly n_bytes of the tensor) with the tensor's data.
  using FillFn = std::function<void(uint8_t* out)>;

  explicit GgufWriter(uint64_t alignment = 32) : alignment_(alignment) {}

  void add(const std::string& key, GgufValue value);
  // dims in ggml order (dims[0] contiguous).
  void add_tensor(const std::string& name, std::vector<uint64_t> dims, TensorType type, FillFn fill);

  // Writes the whole file; throws GgufError on I/O failure.
  void write(const std::string& path) const;

 private:
  void write_to(const std::string& path) const;
  struct PendingTensor {
    GgufTensorInfo info;
    FillFn fill;
  };
  uint64_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace kvserve
