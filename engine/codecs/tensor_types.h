// The one table of ggml tensor types: id, name, block size, bytes per block, and the function
// that decodes a run of blocks to float (null where this build cannot load the type yet). The
// GGUF reader sizes tensors from it, the loader decodes through it, the writer encodes with it,
// and every error names a type through it ("Q4_K (12)"). A new weight format is a row here
// plus its kernels behind weights/weight_matrix.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace kvserve {

// The ids GGUF files carry (ggml's numbering).
enum class TensorType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22,
  kIQ4_XS = 23, kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kIQ1_M = 29, kBF16 = 30,
  kTQ1_0 = 34, kTQ2_0 = 35, kMXFP4 = 39,
};

struct TensorTypeTraits {
  TensorType type;
  const char* name;           // "F32", "Q4_K", ...
  int64_t block_size;         // values per block (1 for plain types)
  int64_t bytes_per_block;
  // src: [n / block_size] blocks; dst: [n] floats; n a multiple of block_size. Null: this build
  // cannot load tensors of the type.
  void (*to_float)(const void* src, float* dst, int64_t n);
  // dst: [n / block_size] blocks from src: [n] floats (exact for the plain types). Null: the
  // writer cannot produce the type.
  void (*from_float)(const float* src, void* dst, int64_t n);
};

// The traits of a ggml type id, or null if no ggml type has that id.
const TensorTypeTraits* find_tensor_type(uint32_t id);
const TensorTypeTraits& tensor_type(TensorType type);
// "Q4_K (12)"; "type 99" for an id no ggml type has.
std::string tensor_type_label(uint32_t id);
const char* tensor_type_name(TensorType type);
// The names of the types this build loads, for error messages: "F32, F16, BF16".
std::string loadable_tensor_types();
// Bytes of n values (n a multiple of the block size).
int64_t tensor_bytes(TensorType type, int64_t n);
// Bytes per type as shares, largest first: "Q4_K 61%, Q6_K 36%, F32 3%" (shares under 0.5% as
// "<1%").
std::string tensor_type_mix(const std::map<TensorType, int64_t>& bytes);

}  // namespace kvserve
