#include "model/mla_attention.h"

#include <algorithm>
#include <cstring>

#include "model/scratch.h"

namespace kvserve {

MlaAttention::MlaAttention(Weights w, const ModelHparams::Latent& shape, int n_head, float norm_eps,
                           const KernelTable& kernels)
    : w_(std::move(w)), shape_(shape), n_head_(n_head), eps_(norm_eps), k_(kernels) {}

void MlaAttention::project(const float* h, int64_t T, const float* cos_sin, float* q_abs, float* rows) {
  const int64_t Tp = WeightMatrix::padded_rows(T), H = n_head_;
  const int64_t nope = shape_.qk_nope_dim, rope = shape_.qk_rope_dim, lora = shape_.kv_lora_rank;
  const int64_t head_q = nope + rope, width = row_width();
  grow(q_, Tp * H * head_q);
  grow(kva_, Tp * width);
  grow(xin_, Tp * nope);
  grow(yout_, Tp * std::max(lora, int64_t{shape_.v_head_dim}));
  if (w_.q_a) {
    grow(qa_, Tp * shape_.q_lora_rank);
    w_.q_a->forward(h, T, qa_.data());
    k_.rms_norm(qa_.data(), w_.q_a_norm.data(), T, shape_.q_lora_rank, eps_, qa_.data());
    w_.q->forward(qa_.data(), T, q_.data());
  } else {
    w_.q->forward(h, T, q_.data());
  }
  w_.kv_a->forward(h, T, kva_.data());
  // Adjacent-pair rotation of each head's rotary dims (after its no-rotary ones) and of the key.
  k_.rope(q_.data() + nope, T, H * head_q, cos_sin, n_head_, static_cast<int>(head_q), static_cast<int>(rope), false);
  k_.rope(kva_.data() + lora, T, width, cos_sin, 1, static_cast<int>(rope), static_cast<int>(rope), false);
  for (int64_t t = 0; t < T; ++t) {
    float* row = rows + t * width;
    k_.rms_norm(kva_.data() + t * width, w_.kv_a_norm.data(), 1, lora, eps_, row);
    std::memcpy(row + lora, kva_.data() + t * width + lora, rope * sizeof(float));
  }
  for (int64_t hd = 0; hd < H; ++hd) {
    // Head hd's no-rotary query of every token through its K up-projection, transposed.
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(xin_.data() + t * nope, q_.data() + (t * H + hd) * head_q, nope * sizeof(float));
    w_.k_b[hd]->forward(xin_.data(), T, yout_.data());
    for (int64_t t = 0; t < T; ++t) {
      float* qa = q_abs + (t * H + hd) * width;
      std::memcpy(qa, yout_.data() + t * lora, lora * sizeof(float));
      std::memcpy(qa + lora, q_.data() + (t * H + hd) * head_q + nope, rope * sizeof(float));
    }
  }
}

void MlaAttention::expand(const float* o, int64_t T, float* out) {
  const int64_t Tp = WeightMatrix::padded_rows(T), H = n_head_, lora = shape_.kv_lora_rank, vd = shape_.v_head_dim;
  grow(xin_, Tp * lora);
  grow(yout_, Tp * vd);
  for (int64_t hd = 0; hd < H; ++hd) {
    for (int64_t t = 0; t < T; ++t) std::memcpy(xin_.data() + t * lora, o + (t * H + hd) * lora, lora * sizeof(float));
    w_.v_b[hd]->forward(xin_.data(), T, yout_.data());
    for (int64_t t = 0; t < T; ++t) std::memcpy(out + (t * H + hd) * vd, yout_.data() + t * vd, vd * sizeof(float));
  }
}

std::vector<const WeightMatrix*> MlaAttention::matrices() const {
  std::vector<const WeightMatrix*> m = {w_.q.get(), w_.kv_a.get()};
  if (w_.q_a) m.push_back(w_.q_a.get());
  for (const auto& x : w_.k_b) m.push_back(x.get());
  for (const auto& x : w_.v_b) m.push_back(x.get());
  return m;
}

void MlaAttention::prepare(int64_t max_rows) {
  for (WeightMatrix* m : {w_.q.get(), w_.kv_a.get(), w_.q_a.get()})
    if (m) m->prepare(max_rows, false);
  for (auto* heads : {&w_.k_b, &w_.v_b})
    for (auto& m : *heads) m->prepare(max_rows, false);
}

int64_t MlaAttention::bytes() const {
  int64_t n = 0;
  for (const WeightMatrix* m : matrices()) n += m->bytes();
  return n;
}

int64_t MlaAttention::panel_bytes() const {
  int64_t n = 0;
  for (const WeightMatrix* m : matrices()) n += m->panel_bytes();
  return n;
}

void MlaAttention::count_bytes(std::map<TensorType, int64_t>& by_type) const {
  for (const WeightMatrix* m : matrices()) m->count_bytes(by_type);
}

void MlaAttention::describe_plan(std::map<std::string, std::string>& plan) const {
  for (const WeightMatrix* m : matrices()) m->describe_plan(plan);
}

int64_t MlaAttention::small_floats() const {
  return static_cast<int64_t>(w_.q_a_norm.size() + w_.kv_a_norm.size());
}

}  // namespace kvserve
