// A mixture-of-experts FFN part: a router picks each token's experts (model/moe_routing.h), and
// each expert used in a step multiplies all of its tokens at once: the tokens routed to expert e
// are gathered into one batch and go through e's gate/up and down matrices in one pass, so a
// step reads each used expert's weights once, however many of its tokens chose it (at one token,
// only the k chosen experts are read). Experts are ordinary WeightMatrix objects over one matrix
// each of the file's stacked tensors, held in the file's type like every other matrix.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "model/arch_spec.h"
#include "model/moe_routing.h"
#include "weights/weight_matrix.h"

namespace kvserve {

class MoeFfn {
 public:
  struct Expert {
    std::unique_ptr<WeightMatrix> gate_up;  // [2·n_ff, n_embd]: gate rows, then up rows
    std::unique_ptr<WeightMatrix> down;     // [n_embd, n_ff]
  };
  struct Weights {
    std::unique_ptr<WeightMatrix> router;  // [n_expert, n_embd]
    std::vector<float> router_bias;        // [n_expert], or empty
    std::vector<Expert> experts;           // [n_expert]
    std::vector<float> gate_up_bias;       // [n_expert, 2·n_ff], or empty
    std::vector<float> down_bias;          // [n_expert, n_embd], or empty
  };
  // act: the experts' gated activation, kSwiGlu or kSwiGluOai.
  MoeFfn(Weights w, const MoeRouting& routing, int64_t n_embd, int64_t n_ff, FfnKind act, const KernelTable& kernels);

  // x: [T, n_embd] += Σ over each token's chosen experts of weight · expert(h); h: [T, n_embd].
  void forward(const float* h, int64_t T, float* x);
  void prepare(int64_t max_rows);

  // Weight bytes one token's step reads: the router and n_used experts.
  int64_t bytes_per_token() const;
  int64_t expert_bytes() const;  // every expert's matrices
  const MoeRouting& routing() const { return routing_; }
  int64_t panel_bytes() const;  // of those held, as packed panels
  void count_bytes(std::map<TensorType, int64_t>& by_type) const;
  void describe_plan(std::map<std::string, std::string>& plan) const;
  int64_t small_floats() const;  // biases held as F32

 private:
  // Small steps (decode): each used expert on a thread of its own, the results added afterwards
  // in expert order. False (nothing done) where a matrix cannot run alone or too many rows came.
  bool forward_experts_in_parallel(const float* h, int64_t T, float* x);
  // Expert e on n gathered rows xe ([n, n_embd]) into ye ([n, n_embd]); gu, act: its scratch.
  // scratch: a private activation scratch (forward_private), or null (the shared one).
  // next: the expert this thread runs after e (its first bytes are requested meanwhile), or -1.
  void run_expert(int64_t e, const float* xe, int64_t n, float* gu, float* act, float* ye, uint8_t* scratch,
                  int64_t next = -1);
  // x[token of pair] += weight of pair · ye row, for the n (token, slot) pairs listed.
  void add_weighted(const int32_t* pairs, int64_t n, const float* ye, float* x) const;

  Weights w_;
  MoeRouting routing_;
  int64_t n_embd_, n_ff_;
  FfnKind act_kind_;
  const KernelTable& k_;
  // Scratch, grown to the largest step seen.
  std::vector<float> logits_, weights_, xe_, gu_, act_, ye_;
  std::vector<int32_t> chosen_, count_, start_, order_, used_;
  std::vector<uint8_t> thread_scratch_;  // the parallel path's activation scratch, one slice a thread
};

}  // namespace kvserve
