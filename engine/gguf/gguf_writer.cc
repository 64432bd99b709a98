#include "gguf/gguf_writer.h"

#include <cstdio>
#include <cstring>
#include <memory>

#include <unistd.h>

namespace kvserve {
namespace {

class File {
 public:
  explicit File(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {
    if (!f_) throw GgufError(path + ": cannot create: " + std::strerror(errno));
  }
  ~File() {
    if (f_) std::fclose(f_);
  }
  void bytes(const void* p, size_t n) {
    if (n && std::fwrite(p, 1, n, f_) != n) throw GgufError(path_ + ": write failed");
    pos_ += n;
  }
  template <typename T>
  void put(T v) { bytes(&v, sizeof(T)); }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(uint64_t alignment) {
    static const uint8_t zeros[64] = {};
    while (pos_ % alignment) bytes(zeros, std::min<uint64_t>(alignment - pos_ % alignment, 64));
  }
  void close() {
    if (std::fclose(f_) != 0) {
      f_ = nullptr;
      throw GgufError(path_ + ": close failed");
    }
    f_ = nullptr;
  }

 private:
  std::string path_;
  std::FILE* f_;
  uint64_t pos_ = 0;
};

void write_value(File& f, const GgufValue& v) {
  switch (v.type) {
    case GgufType::kUint8: f.put<uint8_t>(std::get<uint64_t>(v.data)); break;
    case GgufType::kInt8: f.put<int8_t>(std::get<int64_t>(v.data)); break;
    case GgufType::kUint16: f.put<uint16_t>(std::get<uint64_t>(v.data)); break;
    case GgufType::kInt16: f.put<int16_t>(std::get<int64_t>(v.data)); break;
    case GgufType::kUint32: f.put<uint32_t>(std::get<uint64_t>(v.data)); break;
    case GgufType::kInt32: f.put<int32_t>(std::get<int64_t>(v.data)); break;
    case GgufType::kUint64: f.put<uint64_t>(std::get<uint64_t>(v.data)); break;
    case GgufType::kInt64: f.put<int64_t>(std::get<int64_t>(v.data)); break;
    case GgufType::kFloat32: f.put<float>(static_cast<float>(std::get<double>(v.data))); break;
    case GgufType::kFloat64: f.put<double>(std::get<double>(v.data)); break;
    case GgufType::kBool: f.put<uint8_t>(std::get<bool>(v.data) ? 1 : 0); break;
    case GgufType::kString: f.str(std::get<std::string>(v.data)); break;
    case GgufType::kArray: {
      const auto& arr = std::get<GgufArray>(v.data);
      f.put<uint32_t>(static_cast<uint32_t>(v.elem_type));
      f.put<uint64_t>(arr.size());
      for (const auto& e : arr) write_value(f, e);
      break;
    }
  }
}

}  // namespace

void GgufWriter::add(const std::string& key, GgufValue value) {
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(const std::string& name, std::vector<uint64_t> dims, TensorType type,
                            FillFn fill) {
  PendingTensor t;
  t.info.name = name;
  t.info.dims = std::move(dims);
  t.info.type = type;
  t.fill = std::move(fill);
  tensors_.push_back(std::move(t));
}

void GgufWriter::write(const std::string& path) const {
  // Written beside the target and renamed into place: a reader that has the old file mapped
  // keeps its copy, and nobody ever sees half a file.
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    write_to(tmp);
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw GgufError(path + ": cannot rename into place: " + std::strerror(errno));
  }
}

void GgufWriter::write_to(const std::string& path) const {
  File f(path);
  f.put<uint32_t>(0x46554747);
  f.put<uint32_t>(3);
  f.put<uint64_t>(tensors_.size());
  f.put<uint64_t>(metadata_.size() + (alignment_ != 32 ? 1 : 0));
  if (alignment_ != 32) {
    f.str("general.alignment");
    f.put<uint32_t>(static_cast<uint32_t>(GgufType::kUint32));
    f.put<uint32_t>(static_cast<uint32_t>(alignment_));
  }
  for (const auto& [key, value] : metadata_) {
    f.str(key);
    f.put<uint32_t>(static_cast<uint32_t>(value.type));
    write_value(f, value);
  }
  uint64_t offset = 0;
  for (const auto& t : tensors_) {
    f.str(t.info.name);
    f.put<uint32_t>(static_cast<uint32_t>(t.info.dims.size()));
    for (uint64_t d : t.info.dims) f.put<uint64_t>(d);
    f.put<uint32_t>(static_cast<uint32_t>(t.info.type));
    f.put<uint64_t>(offset);
    offset += (t.info.n_bytes() + alignment_ - 1) / alignment_ * alignment_;
  }
  f.pad_to(alignment_);
  for (const auto& t : tensors_) {
    std::vector<uint8_t> buf(t.info.n_bytes());
    t.fill(buf.data());
    f.bytes(buf.data(), buf.size());
    f.pad_to(alignment_);
  }
  f.close();
}

}  // namespace kvserve
