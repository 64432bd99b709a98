// DeepSeek-V2's multi-head latent attention (MLA), around the paged attention kernel. Each token
// caches one latent c (kv_lora_rank values, normed) and one rotary key k_r shared by every
// head; head h's key would be [W_kb[h]·c, k_r] and its value W_vb[h]·c. Nothing per head is
// ever cached or rebuilt: the K up-projection is absorbed into the query (q_h·k = (W_kb[h]ᵀ
// q_nope)·c + q_rope·k_r), so attention is one-KV-head attention over the cached rows whose
// values are the rows' first kv_lora_rank entries, and the V up-projection is applied to each
// head's weighted sum of latents afterwards. Prompts take the same path (llama.cpp does too).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"
#include "model/model.h"
#include "weights/weight_matrix.h"

namespace kvserve {

class MlaAttention {
 public:
  struct Weights {
    std::unique_ptr<WeightMatrix> q_a;   // [q_lora, n_embd], or null: no query bottleneck
    std::vector<float> q_a_norm;         // [q_lora] RMSNorm after q_a, or empty
    std::unique_ptr<WeightMatrix> q;     // [n_head·(nope + rope), n_embd or q_lora]: each head's no-rotary, then rotary dims
    std::unique_ptr<WeightMatrix> kv_a;  // [kv_lora + rope, n_embd]: the latent, then the shared rotary key
    std::vector<float> kv_a_norm;        // [kv_lora]
    std::vector<std::unique_ptr<WeightMatrix>> k_b;  // [n_head] each [kv_lora, nope]: c·(k_b q) = (k_bᵀ c)·q
    std::vector<std::unique_ptr<WeightMatrix>> v_b;  // [n_head] each [v_head, kv_lora]
  };
  MlaAttention(Weights w, const ModelHparams::Latent& shape, int n_head, float norm_eps, const KernelTable& kernels);

  // The width of a cached row and of an absorbed query head: kv_lora + rope.
  int64_t row_width() const { return shape_.kv_lora_rank + shape_.qk_rope_dim; }
  // h: [T, n_embd] the normed input; cos_sin: [T, rope] this step's rotation.
  // q_abs: [T, n_head, row_width()] each head's absorbed query (W_kbᵀ·q_nope, then rotated q_rope);
  // rows: [T, row_width()] each token's cache row (normed latent, then rotated shared key).
  void project(const float* h, int64_t T, const float* cos_sin, float* q_abs, float* rows);
  // o: [T, n_head, kv_lora] each head's attention-weighted sum of latents; out: [T, n_head·v_head].
  void expand(const float* o, int64_t T, float* out);
  void prepare(int64_t max_rows);

  int64_t bytes() const;  // weight bytes one step streams
  int64_t panel_bytes() const;
  void count_bytes(std::map<TensorType, int64_t>& by_type) const;
  void describe_plan(std::map<std::string, std::string>& plan) const;
  int64_t small_floats() const;

 private:
  std::vector<const WeightMatrix*> matrices() const;

  Weights w_;
  ModelHparams::Latent shape_;
  int n_head_;
  float eps_;
  const KernelTable& k_;
  std::vector<float> qa_, q_, kva_, xin_, yout_;  // scratch, grown to the largest step
};

}  // namespace kvserve
