// The engine's public face: submit, cancel, stats, shutdown. One loop thread owns every
// sequence, the scheduler and the KV cache; submit and cancel are messages to its inbox, and
// results go to each request's sink.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "runtime/config.h"
#include "grammar/constraint.h"
#include "gguf/gguf.h"
#include "kv_cache/block_allocator.h"
#include "kv_cache/kv_storage.h"
#include "kv_cache/kv_what_if.h"
#include "model/model.h"
#include "common/request.h"
#include "runtime/scheduler.h"
#include "runtime/kv_events.h"
#include "speculative/proposer.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace kvserve {

// What the engine serves and what its KV cache costs, for logs and GetModelInfo.
struct ModelInfo {
  std::string architecture = "llama";
  std::string name;
  std::string weight_type;      // the file's tensor types by bytes: "Q4_K 61%, Q6_K 36%, F32 3%"
  std::string weights_held_as;  // the same for the weights as held in memory and multiplied
  std::string matmul_plan;      // the kernel each held type takes at 1, 4, 16, 64, 512 rows
  int64_t weight_bytes_per_step = 0;  // weight bytes a decode step streams from memory
  int64_t weight_bytes = 0;           // weight bytes held in memory
  // Mixtures (0 for a dense model): every expert's weight bytes; experts per layer and per token.
  int64_t expert_bytes = 0;
  int32_t n_expert = 0, n_expert_used = 0;
  std::string kernels;          // the CPU kernel set in use: "avx512", "avx2_vnni", "avx2" or "scalar"
  std::string chat_template;    // where the chat template comes from, its tool-call and reasoning formats
  int32_t num_threads = 0;      // compute threads
  std::string threads_reason;   // why that many: "model.num_threads", or the CPU budget found
  int64_t n_params = 0;
  int32_t n_layer = 0, n_head = 0, n_head_kv = 0, head_dim = 0, n_embd = 0, n_ff = 0, n_vocab = 0;
  int32_t n_ctx_train = 0;
  int32_t max_model_len = 0;
  int32_t block_size = 0;
  int32_t num_blocks = 0;
  int64_t token_capacity = 0;   // positions of every layer: num_blocks · block_size / kv_groups
  int32_t kv_element_bytes = 4;   // 4 (f32), 2 (f16), 1 (q8_0's int8 values)
  std::string kv_element_size = "4";  // bytes per K/V value as stored: "4", "2", "34/32" (q8_0)
  int64_t kv_bytes_per_token = 0;  // 2 · n_layer · n_head_kv · head_dim · kv_element_bytes (1 · ... for a latent cache)
  // Multi-head latent attention (all 0 otherwise): the cache holds per token and layer one row of
  // kv_lora_rank + qk_rope_dim values (n_head_kv 1, head_dim their sum, no V rows);
  // kv_bytes_per_token_multi_head is what caching each head's K (qk_nope_dim + qk_rope_dim) and
  // V (v_head_dim) instead would take: n_layer · n_head · (qk_nope + qk_rope + v_head) · element bytes.
  ModelHparams::Latent mla;
  int64_t kv_bytes_per_token_multi_head = 0;
  int64_t kv_total_bytes = 0;
  double max_concurrency = 0;   // full-length (max_model_len) requests that fit at once (num_blocks / kv_blocks_per_request)
  int32_t max_request_tokens = 0;  // prompt + output of the longest request the whole cache holds
                                   // (max_model_len unless the cache is smaller than one request)
  int32_t sliding_window = 0;   // positions a windowed layer sees (0: none)
  // How layers share blocks (kv_cache/kv_layout.h): a windowed group's blocks behind its window
  // are released, so a full-length request holds less than max_model_len on those layers.
  std::string kv_layout;        // "6 groups of 1 layer: 5 windowed (32 positions), 1 full"
  int32_t kv_groups = 1;
  int32_t kv_windowed_layers = 0, kv_full_layers = 0;
  int64_t kv_blocks_per_request = 0;  // blocks a full-length request holds at most, every group
  int64_t kv_bytes_per_request = 0;   // their bytes
  // Its token-layers (positions x layers) on windowed and on full layers.
  int64_t kv_request_token_layers_windowed = 0, kv_request_token_layers_full = 0;
  // The same in positions of every layer (what a request holding that much on every layer would
  // span): max_model_len unless some layers are windowed.
  int64_t kv_tokens_per_request = 0;
  std::vector<KvVariant> kv_what_if;  // the same budget under MHA, GQA, MQA and MLA layouts
  // Speculative decoding as configured: "off", "ngram (...)" or "draft <file> (...)", as logged.
  std::string speculative;
  // method "draft": the draft model and its own KV cache (0 and empty otherwise).
  std::string draft_name;
  int64_t draft_n_params = 0;
  int32_t draft_num_blocks = 0;
  int64_t draft_kv_bytes = 0;
};

struct EngineStats {
  int32_t running = 0;
  int32_t waiting = 0;             // interactive requests waiting to be admitted
  int32_t waiting_background = 0;  // background (inspection) requests waiting
  int64_t preemptions_total = 0;
  int32_t blocks_total = 0;
  int32_t blocks_used = 0;
  int32_t blocks_free = 0;
  int64_t tokens_cached = 0;   // tokens whose K/V are in the cache now
  double kv_usage = 0.0;       // blocks_used / blocks_total
  int64_t prompt_tokens_total = 0;
  int64_t generation_tokens_total = 0;
  int64_t requests_finished_total = 0;
  int64_t steps_total = 0;
  bool prefix_caching = false;
  int64_t prompt_tokens_admitted = 0;   // prompt tokens of requests admitted so far
  int64_t prompt_tokens_from_cache = 0; // of those, reused from the prefix cache
  double prefix_cache_hit_rate = 0.0;   // prompt_tokens_from_cache / prompt_tokens_admitted
  int32_t cached_blocks = 0;            // blocks registered in the prefix cache (held or not)
  int64_t evictions_total = 0;          // cached blocks evicted to make room
  // Speculative decoding: verifications run, tokens proposed in them, and of those accepted.
  int64_t spec_drafts_total = 0;
  int64_t spec_draft_tokens_total = 0;
  int64_t spec_accepted_tokens_total = 0;
  // method "draft": the draft's own KV blocks, and how many of them are free.
  int32_t draft_blocks_total = 0;
  int32_t draft_blocks_free = 0;
  // Seconds the loop thread spent in steps (scheduling, the forward pass, sampling, streaming),
  // and of those in the model's forward passes: against wall time, how busy the engine was kept.
  double busy_seconds_total = 0;
  double forward_seconds_total = 0;
};

// The vocabulary as a grammar sees it: text tokens by their bytes; control, unknown and unused
// tokens never match text; the end-of-generation tokens end a complete one. special: control
// tokens that do not end generation match their spelling (requests with special_text, whose
// grammars write a chat format's control-token markers).
std::shared_ptr<const grammar::TokenIndex> make_token_index(const Tokenizer& tokenizer, bool special = false);

class DraftModelProposer;

class Engine {
 public:
  enum class Shutdown { kDrain, kAbort };

  // Loads the model and sizes the cache (exceptions name the field or file), starts the loop.
  explicit Engine(const EngineOptions& options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Checks and queues a request. Never blocks on the loop. On success every event of the request
  // goes to `sink`, ending with exactly one event that carries a Completion.
  SubmitResult submit(Request request, std::shared_ptr<ResultSink> sink);
  // Aborts a request at the next step (its final event says kCancelled); unknown ids are ignored.
  void cancel(uint64_t id);
  EngineStats stats() const;
  // Follows the prefix cache's changes from the next step on (null: stop); any thread.
  void set_kv_event_listener(std::shared_ptr<KvEventListener> listener);
  // Stops accepting; with kDrain waits up to `grace` for requests in flight, then cancels what
  // is left and stops the loop. Idempotent.
  void shutdown(Shutdown mode, std::chrono::milliseconds grace = std::chrono::milliseconds(0));
  bool accepting() const { return accepting_; }

  const ModelInfo& model_info() const { return info_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ChatTemplate& chat_template() const { return *chat_template_; }
  const EngineOptions& options() const { return options_; }

  // Empty if `request` is acceptable; else a message naming the field (the checks submit makes).
  std::string validate_request(const Request& request) const;

 private:
  struct Cancel {
    uint64_t id;
  };
  struct AbortAll {};
  using Message = std::variant<std::unique_ptr<Sequence>, Cancel, AbortAll>;

  // On the loop thread, before the loop: loads the model and tokenizer, sizes the cache.
  void load();
  void loop();
  void take_inbox(std::vector<Message>& msgs);
  void step();
  // The batch of a step's chunks, asking for the logits of scored prompt rows and sampled rows.
  void build_batch(const SchedulerOutput& plan);
  // After the forward pass: one chunk's prompt scores, computed tokens and sampled token; its
  // logits start at `logits`. Returns where the next chunk's logits start.
  const float* advance(const ScheduledChunk& chunk, const float* logits);
  // Samples seq's next token from one row of raw logits (against a proposed token when draft
  // >= 0: Sampler::sample_against), appends it and streams it, or ends the request (stop, length,
  // error). *token: what was sampled (-1 if nothing). False when the request ended: seq is gone.
  bool emit(Sequence& seq, const float* raw_logits, int32_t draft, int32_t* token);
  // Speculative decoding (engine_speculative.cc). Before scheduling: each running decode's
  // proposed tokens. After the forward pass: a chunk's proposed tokens accepted while they match
  // what is sampled from its rows; the first that does not is replaced by that sample.
  void propose_drafts();
  // At load: the proposer speculative.method names (none when "off").
  // Tokens to propose for s now, in a step of base_rows sequences (0: proposing does not pay at
  // its acceptance rate).
  int32_t proposal_length(const Sequence& s, int64_t base_rows) const;
  // After a forward pass of decodes only: what a pass of that many rows costs lately.
  void note_decode_pass(const SchedulerOutput& plan, double seconds);
  // A decode pass of `rows` rows against one of `base_rows`, as measured (note_decode_pass).
  double pass_cost(int64_t base_rows, int64_t rows) const;
  void load_proposer(const ModelLoadOptions& load, int32_t kv_element_bytes, int64_t draft_cache_bytes);
  void verify(const ScheduledChunk& chunk, const float* logits);
  // Applies logit_bias and the grammar's mask to a sequence's logits; false when it ended the
  // sequence instead (the grammar failed, or allows nothing).
  bool constrain(Sequence& s, float* logits);
  static int64_t scored_rows(const ScheduledChunk& chunk);
  void finish(Sequence* seq, FinishReason reason, std::string error = {}, Event event = {});
  // Hands an event to the request's sink; a sink that throws ends the request, not the loop.
  void deliver(Sequence& seq, Event event);
  // Capture buffer, head mask and prompt-score slots for a request that asked for them.
  void prepare_inspection(Sequence* seq) const;
  // After a forward step: records the log-probabilities of the prompt tokens a chunk scored.
  void score_prompt_rows(Sequence& s, int64_t first_pos, int64_t n_rows, const float* logits);
  void publish_stats();

  EngineOptions options_;
  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<ChatTemplate> chat_template_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<Model> model_;
  ModelInfo info_;
  ExpArray exp_array_ = nullptr;  // the kernel level's, for sampling and log-probabilities

  // Owned by the loop thread.
  std::unique_ptr<KvStorage> kv_;
  std::unique_ptr<BlockAllocator> alloc_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<uint64_t, std::unique_ptr<Sequence>> seqs_;
  BatchInputs batch_;
  std::vector<float> scratch_logits_;
  std::unique_ptr<grammar::GrammarCache> grammars_;  // compiled constraints over this vocabulary
  std::unique_ptr<grammar::GrammarCache> special_grammars_;  // the same with control tokens spelled
  std::shared_ptr<KvEventListener> kv_listener_;  // under mu_; the loop takes a copy each turn
  int64_t prompt_tokens_total_ = 0, generation_tokens_total_ = 0, finished_total_ = 0, steps_total_ = 0;
  double busy_seconds_ = 0, forward_seconds_ = 0;
  // Speculative decoding: verifications, tokens proposed in them, tokens accepted.
  int64_t spec_drafts_total_ = 0, spec_draft_tokens_total_ = 0, spec_accepted_tokens_total_ = 0;
  // Decode passes' seconds by their rows (0: none seen), moving averages: what verifying
  // proposed tokens costs this model on this machine, which the kernels make far from linear.
  std::vector<double> pass_seconds_by_rows_;
  int64_t steps_since_plain_pass_ = 0;  // decode steps with proposals since the last without
  double draft_bytes_share_ = 0;  // a draft's weight bytes a step against the model's
  std::unique_ptr<Proposer> proposer_;              // null when speculative.method is "off"
  DraftModelProposer* draft_ = nullptr;             // proposer_ when it is a draft model

  // Shared with callers.
  mutable std::mutex mu_;
  std::condition_variable wake_;   // the loop waits here for messages
  std::condition_variable idle_;   // shutdown waits here for the drain
  std::vector<Message> inbox_;
  int32_t inbox_submits_ = 0;    // interactive sequences in the inbox (for max_waiting)
  int32_t inbox_sequences_ = 0;  // all sequences in the inbox (for the drain)
  std::atomic<int32_t> waiting_ = 0;  // interactive sequences the scheduler has waiting
  std::atomic<int32_t> live_ = 0;  // sequences the loop owns
  std::atomic<bool> accepting_ = true;
  bool stop_ = false;
  std::atomic<uint64_t> next_id_ = 1;
  std::mt19937_64 seed_source_;    // seeds for requests without one (under mu_)
  mutable std::mutex stats_mu_;
  EngineStats stats_;
  std::thread thread_;
};

}  // namespace kvserve
