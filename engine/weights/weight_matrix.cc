#include "weights/weight_matrix.h"

#include <cstring>
#include <stdexcept>

#include "weights/dnnl_matrix.h"
#include "weights/quant_matrix.h"

namespace kvserve {
namespace {

std::string dims_str(const std::vector<uint64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

const GgufTensorInfo& checked(const GgufFile& f, const TensorRef& ref) {
  const GgufTensorInfo& t = f.tensor(ref.name);
  if (t.dims != ref.dims)
    throw GgufError(f.path() + ": tensor '" + ref.name + "' has shape " + dims_str(t.dims) + ", expected " +
                    dims_str(ref.dims));
  if (!tensor_type(t.type).to_float)
    throw GgufError(f.path() + ": tensor '" + ref.name + "' has type " +
                    tensor_type_label(static_cast<uint32_t>(t.type)) + ", which this build cannot load (it loads " +
                    loadable_tensor_types() + ")");
  if (ref.slice >= 0 && (t.dims.size() != 3 || static_cast<uint64_t>(ref.slice) >= t.dims[2]))
    throw GgufError(f.path() + ": tensor '" + ref.name + "' has no matrix " + std::to_string(ref.slice));
  return t;
}

// The values and bytes of what `ref` names: the whole tensor, or one matrix of a 3-D one.
uint64_t part_elements(const TensorRef& ref, const GgufTensorInfo& t) {
  return ref.slice < 0 ? t.n_elements() : t.dims[0] * t.dims[1];
}
const uint8_t* part_data(const GgufFile& f, const TensorRef& ref, const GgufTensorInfo& t) {
  const auto* base = static_cast<const uint8_t*>(f.tensor_data(t));
  return ref.slice < 0 ? base : base + static_cast<uint64_t>(ref.slice) * (t.n_bytes() / t.dims[2]);
}

}  // namespace

std::vector<float> load_float_tensor(const GgufFile& f, const TensorRef& ref) {
  const GgufTensorInfo& t = checked(f, ref);
  std::vector<float> out(part_elements(ref, t));
  tensor_type(t.type).to_float(part_data(f, ref, t), out.data(), static_cast<int64_t>(out.size()));
  f.release(t);
  return out;
}

std::unique_ptr<WeightMatrix> make_weight_matrix(ComputeContext& ctx, const GgufFile& f,
                                                 const std::vector<TensorRef>& parts, const WeightPolicy& policy) {
  // Every part shares n_in; their rows stack into one [n_out, n_in] matrix.
  const int64_t n_in = static_cast<int64_t>(parts.at(0).dims.at(0));
  std::vector<const GgufTensorInfo*> infos;
  bool all_f32 = true, all_bf16 = true;
  for (const TensorRef& p : parts) {
    infos.push_back(&checked(f, p));
    all_f32 &= infos.back()->type == TensorType::kF32;
    all_bf16 &= infos.back()->type == TensorType::kBF16;
  }
  if (!all_f32 && !all_bf16) {
    // Held as stored: the bytes copied once into the model's arena.
    std::vector<HeldRows> held;
    // Packed where the kernel plan multiplies panels (kernels/matmul_plan.h).
    for (const TensorRef& p : parts) held.push_back(hold_tensor(ctx, f, p, policy.repack, policy.int8_activations));
    return make_held_matrix(ctx, std::move(held), n_in, policy);
  }
  std::vector<float> w;
  for (size_t i = 0; i < parts.size(); ++i) {
    const GgufTensorInfo& t = *infos[i];
    const size_t at = w.size(), n = part_elements(parts[i], t);
    w.resize(at + n);
    tensor_type(t.type).to_float(part_data(f, parts[i], t), w.data() + at, static_cast<int64_t>(n));
    f.release(t);
  }
  const int64_t n_out = static_cast<int64_t>(w.size()) / n_in;
  return make_weight_matrix(ctx, w.data(), n_out, n_in, all_bf16 ? TensorType::kBF16 : TensorType::kF32, policy);
}

void HeldRows::decode_row(int64_t r, float* out, int64_t n) const {
  // Packed rows are interleaved 16 to a panel: row r's bytes are not at r * row_bytes.
  if (panels) throw std::logic_error("HeldRows::decode_row: the rows are packed panels");
  tensor_type(type).to_float(data + r * row_bytes, out, n);
}

HeldRows hold_tensor(ComputeContext& ctx, const GgufFile& f, const TensorRef& ref, bool as_panels,
                     bool int8_activations) {
  const GgufTensorInfo& t = checked(f, ref);
  const uint64_t n = part_elements(ref, t);
  const int64_t rows = t.dims.size() > 1 ? static_cast<int64_t>(n / t.dims[0]) : 1;
  const auto bytes = static_cast<size_t>(ref.slice < 0 ? t.n_bytes() : t.n_bytes() / t.dims[2]);
  uint8_t* dst = ctx.arena.allocate(bytes);
  std::memcpy(dst, part_data(f, ref, t), bytes);
  f.release(t);
  HeldRows held{t.type, dst, rows, static_cast<int64_t>(bytes) / rows};
  const auto type = static_cast<uint32_t>(t.type);
  const auto n_in = static_cast<int64_t>(t.dims.at(0));
  if (as_panels && plan_packs(*ctx.kernels, type, n_in, rows, int8_activations)) {
    ctx.kernels->pack_panels(type, dst, rows, held.row_bytes, n_in);
    held.panels = true;
  }
  return held;
}

std::unique_ptr<WeightMatrix> make_held_matrix(ComputeContext& ctx, std::vector<HeldRows> parts, int64_t n_in,
                                               const WeightPolicy& policy) {
  return std::make_unique<QuantMatrix>(ctx, std::move(parts), n_in, policy.int8_activations);
}

std::unique_ptr<WeightMatrix> make_weight_matrix(ComputeContext& ctx, const float* w, int64_t n_out, int64_t n_in,
                                                 TensorType stored, const WeightPolicy& policy) {
  // BF16 without native support is widened to F32: the values are exact.
  const bool bf16 = policy.keep_bf16 && stored == TensorType::kBF16 && ctx.bf16_native;
  return std::make_unique<DnnlMatrix>(ctx, w, n_out, n_in, bf16);
}

}  // namespace kvserve
