#include "weights/quant_matrix.h"

#include <algorithm>
#include <stdexcept>

#include "kernels/matmul_plan.h"
#include "kernels/int8/int8_matmul.h"

namespace kvserve {

namespace {
// Parts held one after the other in the same form become one (fused Q/K/V of one type, gate and
// up): one product instead of several, each of which rounds the activations again and meets
// the threads at its end. Packed K-type panels go in pairs, the last alone where their number is
// odd (kernels/int8/k_gemm.cc's KLayout): a packed part ending on a lone panel stays apart.
std::vector<HeldRows> merge_adjacent(std::vector<HeldRows> parts) {
  std::vector<HeldRows> out;
  for (const HeldRows& p : parts) {
    if (!out.empty()) {
      HeldRows& last = out.back();
      const int64_t bytes = last.rows * last.row_bytes;
      if (last.type == p.type && last.row_bytes == p.row_bytes && last.panels == p.panels &&
          last.data + bytes == p.data && bytes % 64 == 0 && (!last.panels || last.rows % 32 == 0)) {
        last.rows += p.rows;
        continue;
      }
    }
    out.push_back(p);
  }
  return out;
}

// What a product of part p reads first.
ByteSpan part_start(const HeldRows& p) { return {p.data, std::min(p.rows * p.row_bytes, kNextReadBytes)}; }
}  // namespace

QuantMatrix::QuantMatrix(ComputeContext& ctx, std::vector<Part> parts, int64_t n_in, bool int8_activations)
    : WeightMatrix(0, n_in), ctx_(&ctx), parts_(merge_adjacent(std::move(parts))), int8_activations_(int8_activations) {
  for (const Part& p : parts_) {
    n_out_ += p.rows;
    if (p.panels && !int8_path(p) && p.type != TensorType::kF16)
      throw std::logic_error("QuantMatrix: packed panels need the integer path");
  }
}

TensorType QuantMatrix::held_as() const {
  const Part* most = &parts_.at(0);
  for (const Part& p : parts_)
    if (p.rows * p.row_bytes > most->rows * most->row_bytes) most = &p;
  return most->type;
}

int64_t QuantMatrix::bytes() const {
  int64_t b = 0;
  for (const Part& p : parts_) b += p.rows * p.row_bytes;
  return b;
}

int64_t QuantMatrix::panel_bytes() const {
  int64_t b = 0;
  for (const Part& p : parts_) b += p.panels ? p.rows * p.row_bytes : 0;
  return b;
}

void QuantMatrix::count_bytes(std::map<TensorType, int64_t>& by_type) const {
  for (const Part& p : parts_) by_type[p.type] += p.rows * p.row_bytes;
}

bool QuantMatrix::int8_path(const Part& p) const {
  return plan_int8(*ctx_->kernels, static_cast<uint32_t>(p.type), n_in_, int8_activations_);
}

MatmulPath QuantMatrix::path(const Part& p, int64_t m) const {
  return plan_matmul(*ctx_->kernels, static_cast<uint32_t>(p.type),
                     {.n_in = n_in_, .m = m, .panels = p.panels, .int8_activations = int8_activations_});
}

void QuantMatrix::describe_plan(std::map<std::string, std::string>& plan) const {
  for (const Part& p : parts_) {
    const auto type = static_cast<uint32_t>(p.type);
    plan[std::string(tensor_type_name(p.type)) + (p.panels ? " (panels)" : "")] =
        plan_at_report_heights(*ctx_->kernels, type, n_in_, p.panels, int8_activations_);
  }
}

int64_t QuantMatrix::panel_rows() const {
  // About 32 MiB of floats, in multiples of 32 rows (whole pairs of packed panels): the GEMM
  // packs the activations again for every panel, so a panel must be wide enough for that to be
  // small beside its multiply.
  const int64_t rows = (int64_t{1} << 23) / n_in_ / 32 * 32;
  return std::clamp<int64_t>(rows, 32, 8192);
}

void QuantMatrix::prepare(int64_t max_rows, bool /*accumulate*/) {
  if (int8_activations_) {
    const auto need = static_cast<size_t>(int8_scratch_bytes(std::min(max_rows, kSmallBatchRows), n_in_));
    if (ctx_->activation_scratch.size() < need) ctx_->activation_scratch.resize(need);
  }
  if (std::any_of(parts_.begin(), parts_.end(), [&](const Part& p) { return path(p, max_rows) == MatmulPath::kDecodedGemm; })) {
    const size_t need = static_cast<size_t>(panel_rows() * n_in_);
    if (ctx_->panel.size() < need) ctx_->panel.resize(need);
  }
}

int64_t QuantMatrix::private_scratch_bytes(int64_t m) const {
  if (m > kSmallBatchRows) return -1;
  for (const Part& p : parts_)
    if (path(p, m) == MatmulPath::kDecodedGemm) return -1;  // the context's shared panel buffer
  return int8_activations_ ? int8_scratch_bytes(m, n_in_) : 0;
}

void QuantMatrix::forward_private(const float* x, int64_t m, float* y, uint8_t* scratch, ByteSpan then) {
  int64_t col = 0;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const Part& p = parts_[i];
    // Each part's product requests the next part's first bytes, the last the caller's.
    const ByteSpan next = i + 1 < parts_.size() ? part_start(parts_[i + 1]) : then;
    ctx_->kernels->quant_matmul(QuantMatmulArgs{.type = static_cast<uint32_t>(p.type), .w = p.data,
                                                .row_bytes = p.row_bytes, .n_out = p.rows, .n_in = n_in_, .x = x,
                                                .m = m, .y = y + col, .ldy = n_out_, .accumulate = false,
                                                .int8_activations = int8_activations_, .scratch = scratch,
                                                .panels = p.panels, .then = next.data, .then_bytes = next.bytes});
    col += p.rows;
  }
}

ByteSpan QuantMatrix::first_read() const { return part_start(parts_.front()); }

void QuantMatrix::forward(const float* x, int64_t m, float* y, bool accumulate) {
  if (m == 0) return;
  int64_t col = 0;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const Part& p = parts_[i];
    const ByteSpan next = i + 1 < parts_.size() ? part_start(parts_[i + 1]) : ByteSpan{};
    // The kernels, or, for prompt heights off the integer path, decoded panels and oneDNN's GEMM.
    if (path(p, m) != MatmulPath::kDecodedGemm) {
      if (int8_activations_) prepare(m, accumulate);
      ctx_->kernels->quant_matmul(QuantMatmulArgs{.type = static_cast<uint32_t>(p.type), .w = p.data,
                                                  .row_bytes = p.row_bytes, .n_out = p.rows, .n_in = n_in_, .x = x,
                                                  .m = m, .y = y + col, .ldy = n_out_, .accumulate = accumulate,
                                                  .int8_activations = int8_activations_,
                                                  .scratch = ctx_->activation_scratch.data(),
                                                  .panels = p.panels, .then = next.data,
                                                  .then_bytes = next.bytes});
    } else {
      prepare(m, accumulate);
      const int64_t panel = panel_rows();
      for (int64_t r0 = 0; r0 < p.rows; r0 += panel) {
        const int64_t nb = std::min(panel, p.rows - r0);
        if (p.panels)
          ctx_->kernels->dequantize_panels(static_cast<uint32_t>(p.type), p.data + r0 * p.row_bytes, nb, n_in_,
                                           ctx_->panel.data());
        else
          ctx_->kernels->dequantize_rows(static_cast<uint32_t>(p.type), p.data + r0 * p.row_bytes, p.row_bytes, nb,
                                         n_in_, ctx_->panel.data());
        dnnl::sgemm('N', 'T', m, nb, n_in_, 1.0f, x, n_in_, ctx_->panel.data(), n_in_, accumulate ? 1.0f : 0.0f,
                    y + col + r0, n_out_);
      }
    }
    col += p.rows;
  }
}

}  // namespace kvserve
