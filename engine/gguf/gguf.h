// Reading GGUF model files (versions 2 and 3), memory-mapped.
// Format facts from the GGUF specification: little-endian header, metadata key/value pairs,
// tensor infos, then tensor data aligned to general.alignment (default 32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "codecs/tensor_types.h"

namespace kvserve {

// Thrown for any malformed, truncated or unsupported file; the message names the file.
class GgufError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class GgufType : uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};
const char* gguf_type_name(GgufType type);

struct GgufValue;
using GgufArray = std::vector<GgufValue>;

// One metadata value. Integers of every width are kept as int64/uint64 with the declared type
// remembered, so that a writer can round-trip them exactly.
struct GgufValue {
  GgufType type = GgufType::kUint32;
  GgufType elem_type = GgufType::kUint8;  // for arrays: the element type
  std::variant<uint64_t, int64_t, double, bool, std::string, GgufArray> data;

  static GgufValue u32(uint32_t v) { return {GgufType::kUint32, GgufType::kUint8, uint64_t{v}}; }
  static GgufValue i32(int32_t v) { return {GgufType::kInt32, GgufType::kUint8, int64_t{v}}; }
  static GgufValue f32(float v) { return {GgufType::kFloat32, GgufType::kUint8, double{v}}; }
  static GgufValue boolean(bool v) { return {GgufType::kBool, GgufType::kUint8, v}; }
  static GgufValue str(std::string v) {
    return {GgufType::kString, GgufType::kUint8, std::move(v)};
  }
  static GgufValue array(GgufType elem, GgufArray v) {
    return {GgufType::kArray, elem, std::move(v)};
  }

  bool is_integer() const;
  // Conversions that fail with GgufError (naming `key`) when the value is of another kind.
  int64_t as_int(const std::string& key) const;
  double as_float(const std::string& key) const;
  bool as_bool(const std::string& key) const;
  const std::string& as_string(const std::string& key) const;
  const GgufArray& as_array(const std::string& key) const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order: dims[0] is the contiguous dimension
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;  // relative to the start of the data section
  uint64_t n_elements() const;
  uint64_t n_bytes() const;
};

// A GGUF file opened read-only and memory-mapped; tensor data points into the mapping.
class GgufFile {
 public:
  explicit GgufFile(const std::string& path);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  bool has(const std::string& key) const { return metadata_.count(key) != 0; }
  const GgufValue& get(const std::string& key) const;  // throws naming the key if missing
  const GgufValue* find(const std::string& key) const;

  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // Whether some tensor's name starts with `prefix` ("blk.31.").
  bool find_tensor_prefix(const std::string& prefix) const;
  const GgufTensorInfo& tensor(const std::string& name) const;  // throws if missing
  const void* tensor_data(const GgufTensorInfo& info) const;
  // Tells the kernel the tensor's pages may leave this process's memory (they stay in the page
  // cache, and reading them again faults them back): for tensors copied or decoded at load, so
  // that the resident set is not the file plus its copy.
  void release(const GgufTensorInfo& info) const;

 private:
  void parse();

  std::string path_;
  int fd_ = -1;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace kvserve
