#include "model/moe_ffn.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
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
  if (forward_experts_in_parallel(h, T, x)) return;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = start_[e + 1] - start_[e];
    if (n == 0) continue;
    const int32_t* pairs = order_.data() + start_[e];
    for (int64_t r = 0; r < n; ++r) std::memcpy(xe_.data() + r * D, h + (pairs[r] / K) * D, D * sizeof(float));
    run_expert(e, xe_.data(), n, gu_.data(), act_.data(), ye_.data(), nullptr);
    add_weighted(pairs, n, ye_.data(), x);
  }
}

void MoeFfn::run_expert(int64_t e, const float* xe, int64_t n, float* gu, float* act, float* ye, uint8_t* scratch,
                        int64_t next) {
  const int64_t D = n_embd_, F = n_ff_;
  const Expert& ex = w_.experts[e];
  if (scratch)
    ex.gate_up->forward_private(xe, n, gu, scratch, ex.down->first_read());
  else
    ex.gate_up->forward(xe, n, gu);
  if (!w_.gate_up_bias.empty()) k_.add_bias(gu, n, 2 * F, w_.gate_up_bias.data() + e * 2 * F, 2 * F);
  if (act_kind_ == FfnKind::kSwiGluOai)
    swiglu_oai(gu, n, F, act);
  else
    k_.silu_mul(gu, n, F, act);
  if (scratch)
    ex.down->forward_private(act, n, ye, scratch, next >= 0 ? w_.experts[next].gate_up->first_read() : ByteSpan{});
  else
    ex.down->forward(act, n, ye);
  if (!w_.down_bias.empty()) k_.add_bias(ye, n, D, w_.down_bias.data() + e * D, D);
}

void MoeFfn::add_weighted(const int32_t* pairs, int64_t n, const float* ye, float* x) const {
  const int64_t K = routing_.n_used, D = n_embd_;
  for (int64_t r = 0; r < n; ++r) {
    const float wt = weights_[pairs[r]];
    float* out = x + (pairs[r] / K) * D;
    const float* y = ye + r * D;
    for (int64_t c = 0; c < D; ++c) out[c] += wt * y[c];
  }
}

bool MoeFfn::forward_experts_in_parallel(const float* h, int64_t T, float* x) {
  const int64_t E = routing_.n_expert, K = routing_.n_used, D = n_embd_, F = n_ff_;
  const int threads = omp_get_max_threads();
  if (threads < 2 || omp_in_parallel()) return false;
  // The experts used this step, each small enough for one thread (no padded rows), with the
  // scratch each needs; any that cannot run alone: the sequential path.
  used_.clear();
  int64_t scratch = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = start_[e + 1] - start_[e];
    if (n == 0) continue;
    if (n > kSmallBatchRows) return false;
    const int64_t a = w_.experts[e].gate_up->private_scratch_bytes(n), b = w_.experts[e].down->private_scratch_bytes(n);
    if (a < 0 || b < 0) return false;
    scratch = std::max({scratch, a, b});
    used_.push_back(static_cast<int32_t>(e));
  }
  if (used_.size() < 2) return false;
  // The largest first: the items left for the end, when one thread may wait on the other, are
  // then the smallest.
  std::stable_sort(used_.begin(), used_.end(),
                   [&](int32_t a, int32_t b) { return start_[a + 1] - start_[a] > start_[b + 1] - start_[b]; });
  // Every (token, slot) pair's rows in expert order: expert e's at rows start_[e] .. start_[e + 1].
  const int64_t P = T * K;
  grow(xe_, P * D);
  grow(gu_, P * 2 * F);
  grow(act_, P * F);
  grow(ye_, P * D);
  const size_t per_thread = (static_cast<size_t>(scratch) + 63) / 64 * 64;
  grow(thread_scratch_, per_thread * threads);
  for (int64_t r = 0; r < P; ++r) std::memcpy(xe_.data() + r * D, h + (order_[r] / K) * D, D * sizeof(float));
  const auto n_used = static_cast<int64_t>(used_.size());
  // One expert a work item, its matrices on one thread: a step's many small products would
  // otherwise each meet the whole team at a barrier. Each item writes only its own rows. Items
  // are claimed one ahead, so that each expert's last product can ask for the first bytes of
  // the thread's next one.
  std::atomic<int64_t> claims{0};
#pragma omp parallel
  {
    uint8_t* s = thread_scratch_.data() + per_thread * static_cast<size_t>(omp_get_thread_num());
    for (int64_t i = claims.fetch_add(1, std::memory_order_relaxed); i < n_used;) {
      const int64_t next = claims.fetch_add(1, std::memory_order_relaxed);
      const int64_t e = used_[i], r0 = start_[e], n = start_[e + 1] - r0;
      run_expert(e, xe_.data() + r0 * D, n, gu_.data() + r0 * 2 * F, act_.data() + r0 * F, ye_.data() + r0 * D, s,
                 next < n_used ? used_[next] : -1);
      i = next;
    }
  }
  // Added in expert order, as the sequential path adds them: the same sums whatever the path.
  add_weighted(order_.data(), P, ye_.data(), x);
  return true;
}

void MoeFfn::prepare(int64_t max_rows) {
  w_.router->prepare(max_rows, false);
  for (Expert& e : w_.experts) {
    e.gate_up->prepare(max_rows, false);
    e.down->prepare(max_rows, false);
  }
}

int64_t MoeFfn::expert_bytes() const {
  int64_t bytes = 0;
  for (const Expert& e : w_.experts) bytes += e.gate_up->bytes() + e.down->bytes();
  return bytes;
}

int64_t MoeFfn::bytes_per_token() const {
  return w_.router->bytes() + expert_bytes() / routing_.n_expert * routing_.n_used;
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
