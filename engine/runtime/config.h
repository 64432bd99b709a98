// Options of the engine's areas, one struct each, loaded from a JSON config and validated once
// at start-up. Every error names the offending field ("cache.block_size: ...").
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "common/config_error.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace kvserve {

struct ModelOptions {
  std::string path;             // GGUF file to serve (required)
  int32_t num_threads = 0;      // compute threads for kernels and oneDNN; 0 = the CPUs the process may use (affinity, cgroup quota)
  // BF16 weights: false = widen to F32 at load (exact; with oneDNN 2.6 the faster choice for
  // prompts and batches on the CPUs measured); true = keep them BF16 where the CPU multiplies
  // BF16 natively (half the weight memory, faster single-stream decode).
  bool keep_bf16 = false;
  // Quantized weights (every block type but Q2_K and Q3_K) multiply activations rounded to 8
  // bits per block (32 values; 256 for the K types), as llama.cpp does, where the CPU has AVX-512
  // VNNI; false multiplies float activations (the exact product of the stored weights; slower).
  bool int8_activations = true;
  // Weights on that integer path, and F16 ones on AVX-512 CPUs, are rewritten once at load, in
  // place and to the same bytes, into panels of 16 rows in the order the products read them
  // (faster decode); false keeps the file's layout. Matrices whose rows are also looked up (a
  // tied embedding) keep it always.
  bool repack_weights = true;
  // CPU kernel set: "auto" (the best this CPU supports), or "avx512", "avx2_vnni", "avx2", "scalar" to force
  // one (for tests, and for CPUs that lower their clock under AVX-512); a level the CPU lacks is
  // refused at start-up. Below avx512, oneDNN is held to the same instructions.
  std::string kernels = "auto";
  // A Jinja chat template to use instead of the model file's tokenizer.chat_template ("" = the
  // file's, or ChatML when it has none): what the HTTP API's /v1/chat/completions renders.
  std::string chat_template_file;
};

struct CacheOptions {
  int32_t block_size = 16;               // tokens per KV block
  int32_t num_blocks = 0;                // KV blocks to allocate; 0 = derive from memory_bytes
  int64_t memory_bytes = int64_t{1} << 30;  // KV budget in bytes ("2GiB" in JSON too), used when num_blocks is 0
  bool enable_prefix_caching = true;     // reuse the KV blocks of prompt prefixes already computed
  // Sliding-window layers (Gemma 2/3, phi3) keep blocks of their own and release those behind
  // the window (kv_cache/kv_layout.h); false: every layer keeps every block of a request, as
  // with one block table (vLLM's --disable-hybrid-kv-cache-manager). For A/B measurement.
  bool release_windowed_blocks = true;
  // K/V element type: "f32"; "f16" (half the bytes per token, so twice the tokens in the same
  // budget and half the bytes attention reads; llama.cpp's default cache type); or "q8_0" (each
  // token's K and V rows in blocks of 32 int8 values with an F16 scale, as llama.cpp's
  // --cache-type-k q8_0: 34/32 bytes a value, 1.88x the tokens of f16).
  std::string dtype = "f32";
};

struct SchedulerOptions {
  int32_t max_num_seqs = 64;              // sequences in one step at most (the batch size)
  int32_t max_num_batched_tokens = 2048;  // tokens (prompt chunks + decodes) in one step at most
  int32_t max_model_len = 0;              // prompt + output tokens per request; 0 = model's context
  int32_t max_waiting = 1024;             // queued interactive requests beyond which submit says
                                          // "overloaded" (background work is bounded by its callers)
  // Tokens of background (inspection) work in one step at most, so that a step that carries it
  // stays short and an interactive request arriving meanwhile starts soon; 0 = no limit.
  int32_t background_tokens_per_step = 16;
  // Prompt tokens in one step at most for a request that scores its prompt (prompt_logprobs,
  // HeadImportance): each such token holds a row of logits (vocabulary x 4 bytes) until the step
  // ends, so this bounds that memory per request.
  int32_t max_scored_tokens_per_step = 256;
};

// Speculative decoding: tokens proposed for a decoding sequence are verified in the same forward
// pass as its next token (one pass over the weights for several tokens), and the output is what
// decoding without it gives (greedy: the same tokens; sampled: the same distribution).
struct SpeculativeOptions {
  // "off"; "ngram" (prompt lookup: the tokens that followed the latest earlier occurrence of the
  // sequence's last n tokens, in its prompt or output); or "draft" (a second, smaller model with
  // the same vocabulary decodes num_tokens ahead, greedily).
  std::string method = "off";
  int32_t num_tokens = 4;  // K: tokens proposed per sequence and step at most
  int32_t ngram_min = 2;   // shortest suffix matched (n)
  int32_t ngram_max = 4;   // longest suffix matched, tried first
  // No sequence speculates in a step that runs more than this many sequences: with a large batch
  // the step is no longer bound by reading the weights, and verified tokens cost full compute.
  int32_t max_batch = 4;
  // true: each sequence proposes as many tokens as pay at its acceptance rate and the measured
  // cost of proposing and verifying (none for a while when none pay); false: always num_tokens.
  bool adaptive = true;
  std::string draft_model;  // method "draft": the draft's GGUF file (its vocabulary must be the model's)
  // method "draft": the share of the KV budget the draft's own cache takes (the model's cache
  // gets the rest): of cache.memory_bytes, or beside cache.num_blocks' blocks in that proportion.
  double draft_cache_share = 0.1;
};

struct EngineOptions {
  ModelOptions model;
  CacheOptions cache;
  SchedulerOptions scheduler;
  SpeculativeOptions speculative;
};

// Reads the "model", "cache", "scheduler" and "speculative" sections of a parsed config; other top-level
// sections are left to their owners. Unknown fields and wrong types are errors.
EngineOptions engine_options_from_json(const nlohmann::json& config);
// Range checks that need no model (the model-dependent ones run when the engine starts).
void validate(const EngineOptions& options);

// Loads a JSON file; ConfigError names the file on a parse failure.
nlohmann::json load_json_file(const std::string& path);

}  // namespace kvserve
