#include "model/moe_ffn.h"

#include <algorithm>
#include <cstring>

#include "model/activations.h"
#include "model/scratch.h"

namespace kvserve {

MoeFfn::MoeFfn(Weights w, const MoeRouting& routing, int64_t n_embd, int64_t n_ff, FfnKind act,
               const KernelTable& kernels)
    : w_(std::move(w)), routing_(routing), n_embd_(n_embd), n_ff_(n_ff), act_kind_(act), k_(kernels) {}

void MoeFfn::forward(const float* h, int64_t T, float* x) {
  const int64_t E = routing_.n_expert, K = routing_.n_used, D = n_embd_, F = n_ff_;
  const int64_t Tp = WeightMatrix::padded_rows(T);
  grow(logits_, Tp * E);
  grow(chosen_, T * K);
  grow(weights_, T * K);
  grow(xe_, Tp * D);
  grow(gu_, Tp * 2 * F);
  grow(act_, Tp * F);
  grow(ye_, Tp * D);
  w_.router->forward(h, T, logits_.data());
  if (!w_.router_bias.empty()) k_.add_bias(logits_.data(), T, E, w_.router_bias.data(), E);
  for (int64_t t = 0; t < T; ++t)
    route_token(logits_.data() + t * E, routing_, chosen_.data() + t * K, weights_.data() + t * K);
  // The (token, slot) pairs grouped by expert, in token order within each: a counting sort.
  count_.assign(E, 0);
  for (int64_t i = 0; i < T * K; ++i) ++count_[chosen_[i]];
  start_.assign(E + 1, 0);
  for (int64_t e = 0; e < E; ++e) start_[e + 1] = start_[e] + count_[e];
  order_.resize(T * K);
  std::vector<int32_t>& next = count_;  // reused as each expert's fill position
  for (int64_t e = 0; e < E; ++e) next[e] = start_[e];
  for (int64_t i = 0; i < T * K; ++i) order_[next[chosen_[i]]++] = static_cast<int32_t>(i);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = start_[e + 1] - start_[e];
    if (n == 0) continue;
    const int32_t* pairs = order_.data() + start_[e];
    for (int64_t r = 0; r < n; ++r) std::memcpy(xe_.data() + r * D, h + (pairs[r] / K) * D, D * sizeof(float));
    const Expert& ex = w_.experts[e];
    ex.gate_up->forward(xe_.data(), n, gu_.data());
    if (!w_.gate_up_bias.empty()) k_.add_bias(gu_.data(), n, 2 * F, w_.gate_up_bias.data() + e * 2 * F, 2 * F);
    if (act_kind_ == FfnKind::kSwiGluOai)
      swiglu_oai(gu_.data(), n, F, act_.data());
    else
      k_.silu_mul(gu_.data(), n, F, act_.data());
    ex.down->forward(act_.data(), n, ye_.data());
    if (!w_.down_bias.empty()) k_.add_bias(ye_.data(), n, D, w_.down_bias.data() + e * D, D);
    for (int64_t r = 0; r < n; ++r) {
      const float wt = weights_[pairs[r]];
      float* out = x + (pairs[r] / K) * D;
      const float* y = ye_.data() + r * D;
      for (int64_t c = 0; c < D; ++c) out[c] += wt * y[c];
    }
  }
}

void MoeFfn::prepare(int64_t max_rows) {
  w_.router->prepare(max_rows, false);
  for (Expert& e : w_.experts) {
    e.gate_up->prepare(max_rows, false);
    e.down->prepare(max_rows, false);
  }
}

int64_t MoeFfn::bytes_per_token() const {
  int64_t expert = 0;
  for (const Expert& e : w_.experts) expert += e.gate_up->bytes() + e.down->bytes();
  return w_.router->bytes() + expert / routing_.n_expert * routing_.n_used;
}

int64_t MoeFfn::panel_bytes() const {
  int64_t n = w_.router->panel_bytes();
  for (const Expert& e : w_.experts) n += e.gate_up->panel_bytes() + e.down->panel_bytes();
  return n;
}

void MoeFfn::count_bytes(std::map<TensorType, int64_t>& by_type) const {
  w_.router->count_bytes(by_type);
  for (const Expert& e : w_.experts) {
    e.gate_up->count_bytes(by_type);
    e.down->count_bytes(by_type);
  }
}

void MoeFfn::describe_plan(std::map<std::string, std::string>& plan) const {
  w_.router->describe_plan(plan);
  w_.experts.front().gate_up->describe_plan(plan);
  w_.experts.front().down->describe_plan(plan);
}

int64_t MoeFfn::small_floats() const {
  return static_cast<int64_t>(w_.router_bias.size() + w_.gate_up_bias.size() + w_.down_bias.size());
}

}  // namespace kvserve
