// The interface every architecture implements, and the factory that picks one from the file's
// general.architecture. The engine sees only this: no weights' or kernels' internals.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/cpu_features.h"
#include "kv_cache/kv_storage.h"
#include "model/batch.h"
#include "weights/weight_matrix.h"

namespace kvserve {

struct KernelTable;

// The shape and provenance of a loaded model, for the KV sizing, logs and GetModelInfo.
struct ModelHparams {
  std::string architecture;   // general.architecture
  std::string name;           // general.name
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;
  int32_t n_ff = 0;
  int32_t n_ctx_train = 0;    // <arch>.context_length
  int32_t sliding_window = 0;       // positions a windowed layer sees (its own included); 0: none
  std::vector<int32_t> layer_windows;  // [n_layer] each layer's window (0: it sees every position)
  int32_t max_positions = 0;        // learned position embeddings: positions past this have none; 0: no limit
  // Multi-head latent attention (DeepSeek-V2), all 0 otherwise: the cache holds, per token and
  // layer, one latent of kv_lora_rank values and one rotary key of qk_rope_dim shared by the
  // heads (then n_head_kv is 1 and head_dim their sum); each head's query and key have
  // qk_nope_dim + qk_rope_dim dims and its value v_head_dim.
  struct Latent {
    int32_t kv_lora_rank = 0, qk_rope_dim = 0, qk_nope_dim = 0, v_head_dim = 0;
    int32_t q_lora_rank = 0;  // the queries' bottleneck (attn_q_a, attn_q_b); 0: one attn_q
    bool on() const { return kv_lora_rank > 0; }
  } mla;
  TensorType weight_type = TensorType::kF32;  // as stored in the file (the embedding's type)
  TensorType held_as = TensorType::kF32;      // as held in memory and multiplied
  std::string file_types;        // the file's tensor types by bytes: "Q4_K 61%, Q6_K 36%, F32 3%"
  std::string held_types;        // the weights as held in memory, by bytes (embedding included)
  // The kernel each held type's products take at 1, 4, 16, 64 and 512 rows (kernels/matmul_plan.h):
  // "Q4_K (panels): k_packed x5; F32: f32_small_batch x4 onednn"
  std::string matmul_plan;
  int64_t bytes_per_step = 0;    // weight bytes one decode step streams (every matrix, one embedding row aside)
  int64_t weight_bytes = 0;      // weight bytes held in memory
  // Mixtures (all 0 for a dense model): every expert's bytes, and the experts a layer has and a
  // token uses; bytes_per_step counts n_expert_used / n_expert of expert_bytes.
  int64_t expert_bytes = 0;
  int32_t n_expert = 0, n_expert_used = 0;
  int64_t panel_bytes = 0;       // of those, held as packed panels (model.repack_weights)
  int64_t n_params = 0;
};

struct ModelLoadOptions {
  WeightPolicy weights;
  const KernelTable* kernels = nullptr;  // null: the best this CPU supports
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelHparams& hparams() const = 0;
  // K/V layout per layer (element_bytes 4; the cache may hold them in 16 bits).
  virtual KvShape kv_shape() const = 0;
  // Runs every token of the batch through the model, storing each token's K/V at its slot
  // first, and returns logits [in.logit_rows.size(), n_vocab] (valid until the next call).
  virtual const float* forward(const BatchInputs& in, KvStorage& kv) = 0;
  // Readies every kernel for batches of 1..max_rows rows, so no step compiles or allocates.
  virtual void warm_up(int64_t max_rows) = 0;
  // The CPU kernel set every step runs.
  virtual KernelLevel kernels() const = 0;
};

// The model of the file's general.architecture; GgufError names an architecture, key or tensor
// this build does not implement.
std::unique_ptr<Model> load_model(const GgufFile& file, const ModelLoadOptions& options);

}  // namespace kvserve
