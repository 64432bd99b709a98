#include "gguf/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <limits>

namespace kvserve {
namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr int kMaxArrayDepth = 8;
constexpr uint32_t kMaxDims = 4;  // GGML_MAX_DIMS

// Bounds-checked reader over the mapped bytes; every failure names the file and the place.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, size_t size)
      : path_(path), data_(data), size_(size) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw GgufError(path_ + ": " + what + " (at byte " + std::to_string(pos_) + ")");
  }
  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  // Metadata in memory takes more than in the file (an array element of one byte is a whole
  // GgufValue): what it may take is bounded by the file's size, so a small file cannot make
  // the reader allocate gigabytes before anything is checked.
  void charge(uint64_t bytes, const std::string& key) {
    const uint64_t budget = 16 * uint64_t{size_} + (uint64_t{64} << 20);
    if (bytes > budget - charged_)
      fail("key '" + key + "': metadata would take more than " + std::to_string(budget >> 20) +
           " MiB of memory (16 times the file, plus 64 MiB)");
    charged_ += bytes;
  }

  template <typename T>
  T read(const char* what) {
    if (remaining() < sizeof(T)) fail(std::string("file truncated while reading ") + what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    uint64_t n = read<uint64_t>(what);
    if (n > remaining()) fail(std::string("string length ") + std::to_string(n) + " of " + what +
                              " runs past the end of the file");
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const std::string& path_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  uint64_t charged_ = 0;
};

size_t fixed_size(GgufType t) {
  switch (t) {
    case GgufType::kUint8: case GgufType::kInt8: case GgufType::kBool: return 1;
    case GgufType::kUint16: case GgufType::kInt16: return 2;
    case GgufType::kUint32: case GgufType::kInt32: case GgufType::kFloat32: return 4;
    case GgufType::kUint64: case GgufType::kInt64: case GgufType::kFloat64: return 8;
    case GgufType::kString: return 8;  // at least its length field
    case GgufType::kArray: return 12;  // at least type + count
  }
  return 0;
}

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

GgufValue read_value(Cursor& c, GgufType type, const std::string& key, int depth) {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufType::kUint8: v.data = uint64_t{c.read<uint8_t>(key.c_str())}; break;
    case GgufType::kInt8: v.data = int64_t{c.read<int8_t>(key.c_str())}; break;
    case GgufType::kUint16: v.data = uint64_t{c.read<uint16_t>(key.c_str())}; break;
    case GgufType::kInt16: v.data = int64_t{c.read<int16_t>(key.c_str())}; break;
    case GgufType::kUint32: v.data = uint64_t{c.read<uint32_t>(key.c_str())}; break;
    case GgufType::kInt32: v.data = int64_t{c.read<int32_t>(key.c_str())}; break;
    case GgufType::kUint64: v.data = c.read<uint64_t>(key.c_str()); break;
    case GgufType::kInt64: v.data = c.read<int64_t>(key.c_str()); break;
    case GgufType::kFloat32: v.data = double{c.read<float>(key.c_str())}; break;
    case GgufType::kFloat64: v.data = c.read<double>(key.c_str()); break;
    case GgufType::kBool: {
      uint8_t b = c.read<uint8_t>(key.c_str());
      if (b > 1) c.fail("key '" + key + "': bool value " + std::to_string(b) + " is not 0 or 1");
      v.data = b != 0;
      break;
    }
    case GgufType::kString: v.data = c.read_string(key.c_str()); break;
    case GgufType::kArray: {
      if (depth >= kMaxArrayDepth) c.fail("key '" + key + "': arrays nested too deeply");
      uint32_t et = c.read<uint32_t>(key.c_str());
      if (!valid_type(et)) c.fail("key '" + key + "': unknown array element type " + std::to_string(et));
      v.elem_type = static_cast<GgufType>(et);
      uint64_t n = c.read<uint64_t>(key.c_str());
      // Every element takes at least fixed_size bytes: a count beyond that is corrupt.
      if (n > c.remaining() / fixed_size(v.elem_type))
        c.fail("key '" + key + "': array count " + std::to_string(n) + " exceeds the file size");
      c.charge(n * sizeof(GgufValue), key);
      GgufArray arr;
      arr.reserve(n);
      for (uint64_t i = 0; i < n; ++i) arr.push_back(read_value(c, v.elem_type, key, depth + 1));
      v.data = std::move(arr);
      break;
    }
  }
  return v;
}

}  // namespace

const char* gguf_type_name(GgufType type) {
  static const char* names[] = {"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32",
                                "bool", "string", "array", "uint64", "int64", "float64"};
  auto i = static_cast<uint32_t>(type);
  return i < std::size(names) ? names[i] : "unknown";
}


bool GgufValue::is_integer() const {
  return std::holds_alternative<uint64_t>(data) || std::holds_alternative<int64_t>(data);
}

int64_t GgufValue::as_int(const std::string& key) const {
  if (auto* u = std::get_if<uint64_t>(&data)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw GgufError("key '" + key + "': value too large");
    return static_cast<int64_t>(*u);
  }
  if (auto* i = std::get_if<int64_t>(&data)) return *i;
  throw GgufError("key '" + key + "' is " + gguf_type_name(type) + ", expected an integer");
}

double GgufValue::as_float(const std::string& key) const {
  if (auto* d = std::get_if<double>(&data)) return *d;
  if (is_integer()) return static_cast<double>(as_int(key));
  throw GgufError("key '" + key + "' is " + gguf_type_name(type) + ", expected a number");
}

bool GgufValue::as_bool(const std::string& key) const {
  if (auto* b = std::get_if<bool>(&data)) return *b;
  throw GgufError("key '" + key + "' is " + gguf_type_name(type) + ", expected a bool");
}

const std::string& GgufValue::as_string(const std::string& key) const {
  if (auto* s = std::get_if<std::string>(&data)) return *s;
  throw GgufError("key '" + key + "' is " + gguf_type_name(type) + ", expected a string");
}

const GgufArray& GgufValue::as_array(const std::string& key) const {
  if (auto* a = std::get_if<GgufArray>(&data)) return *a;
  throw GgufError("key '" + key + "' is " + gguf_type_name(type) + ", expected an array");
}

uint64_t GgufTensorInfo::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : dims) n *= d;
  return n;
}

uint64_t GgufTensorInfo::n_bytes() const { return static_cast<uint64_t>(tensor_bytes(type, static_cast<int64_t>(n_elements()))); }

GgufFile::GgufFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw GgufError(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw GgufError(path + ": not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) {
      ::close(fd_);
      throw GgufError(path + ": mmap failed: " + std::strerror(errno));
    }
    base_ = static_cast<const uint8_t*>(p);
  }
  try {
    parse();
  } catch (...) {
    if (base_) ::munmap(const_cast<uint8_t*>(base_), size_);
    ::close(fd_);
    throw;
  }
}

GgufFile::~GgufFile() {
  if (base_) ::munmap(const_cast<uint8_t*>(base_), size_);
  if (fd_ >= 0) ::close(fd_);
}

void GgufFile::parse() {
  Cursor c(path_, base_, size_);
  if (c.read<uint32_t>("magic") != kGgufMagic) c.fail("not a GGUF file (wrong magic)");
  version_ = c.read<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    c.fail("unsupported GGUF version " + std::to_string(version_) + " (2 and 3 are supported)");
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  // A key/value pair takes at least 8+4+1 bytes, a tensor info at least 8+4+8+4+8.
  if (n_kv > c.remaining() / 13) c.fail("metadata count " + std::to_string(n_kv) + " exceeds the file size");
  if (n_tensors > c.remaining() / 32)
    c.fail("tensor count " + std::to_string(n_tensors) + " exceeds the file size");

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key");
    uint32_t t = c.read<uint32_t>("metadata type");
    if (!valid_type(t)) c.fail("key '" + key + "': unknown value type " + std::to_string(t));
    GgufValue v = read_value(c, static_cast<GgufType>(t), key, 0);
    if (!metadata_.emplace(key, std::move(v)).second) c.fail("duplicate key '" + key + "'");
  }
  if (const GgufValue* a = find("general.alignment")) {
    int64_t al = a->as_int("general.alignment");
    if (al <= 0 || (al & (al - 1)) != 0 || al > (1 << 20))
      c.fail("general.alignment " + std::to_string(al) + " is not a power of two");
    alignment_ = static_cast<uint64_t>(al);
  }

  tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo info;
    info.name = c.read_string("tensor name");
    uint32_t n_dims = c.read<uint32_t>("tensor dims");
    if (n_dims == 0 || n_dims > kMaxDims)
      c.fail("tensor '" + info.name + "': " + std::to_string(n_dims) + " dimensions");
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = c.read<uint64_t>("tensor dim");
      if (dim == 0 || dim > (uint64_t{1} << 40) || n > (uint64_t{1} << 40) / dim)
        c.fail("tensor '" + info.name + "': dimension " + std::to_string(dim) + " out of range");
      n *= dim;
      info.dims.push_back(dim);
    }
    uint32_t t = c.read<uint32_t>("tensor type");
    const TensorTypeTraits* traits = find_tensor_type(t);
    if (!traits) c.fail("tensor '" + info.name + "': " + tensor_type_label(t) + " is not a ggml tensor type");
    if (info.dims[0] % traits->block_size != 0)
      c.fail("tensor '" + info.name + "': " + tensor_type_label(t) + " stores rows in blocks of " +
             std::to_string(traits->block_size) + " values, but a row has " + std::to_string(info.dims[0]));
    info.type = static_cast<TensorType>(t);
    info.offset = c.read<uint64_t>("tensor offset");
    if (info.offset % alignment_ != 0)
      c.fail("tensor '" + info.name + "': offset " + std::to_string(info.offset) + " is not aligned");
    if (!tensor_index_.emplace(info.name, tensors_.size()).second)
      c.fail("duplicate tensor '" + info.name + "'");
    tensors_.push_back(std::move(info));
  }
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  for (const auto& info : tensors_) {
    // Compared by what is left, never by a sum: an offset near 2^64 must not wrap into range.
    const uint64_t room = data_offset_ <= size_ ? size_ - data_offset_ : 0;
    if (info.offset > room || info.n_bytes() > room - info.offset)
      throw GgufError(path_ + ": tensor '" + info.name + "' data (" + std::to_string(info.n_bytes()) +
                      " bytes at offset " + std::to_string(info.offset) +
                      ") runs past the end of the file (truncated?)");
  }
}

bool GgufFile::find_tensor_prefix(const std::string& prefix) const {
  auto it = tensor_index_.lower_bound(prefix);
  return it != tensor_index_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::get(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) throw GgufError(path_ + ": missing metadata key '" + key + "'");
  return *v;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (!t) throw GgufError(path_ + ": missing tensor '" + name + "'");
  return *t;
}

const void* GgufFile::tensor_data(const GgufTensorInfo& info) const {
  return base_ + data_offset_ + info.offset;
}

void GgufFile::release(const GgufTensorInfo& info) const {
  const long page = ::sysconf(_SC_PAGESIZE);
  const auto begin = reinterpret_cast<uintptr_t>(tensor_data(info));
  const uintptr_t first = (begin + page - 1) / page * page, last = (begin + info.n_bytes()) / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace kvserve
