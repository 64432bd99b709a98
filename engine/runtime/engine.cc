#include "runtime/engine.h"

#include "runtime/cpu_budget.h"

#include <dnnl.hpp>
#include <omp.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <future>

#include "kernels/cpu_features.h"
#include "kernels/kernel_table.h"
#include "runtime/request_validation.h"
#include "speculative/draft_model.h"

namespace kvserve {
namespace {

// Compiled constraints kept for reuse: a client sends the same schema request after request.
constexpr size_t kCompiledGrammars = 64;

double seconds_between(Sequence::Clock::time_point a, Sequence::Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A forced lower kernel level holds oneDNN's JIT to the same instructions. oneDNN takes this
// once per process, before its first primitive: later engines in the same process keep the
// first setting, which the log says.
void limit_onednn_isa(KernelLevel level) {
  try {
    dnnl::set_max_cpu_isa(level == KernelLevel::kAvx2Vnni ? dnnl::cpu_isa::avx2_vnni
                          : level == KernelLevel::kAvx2 ? dnnl::cpu_isa::avx2
                                                        : dnnl::cpu_isa::sse41);
  } catch (const dnnl::error&) {
    spdlog::warn("model.kernels {}: oneDNN's instruction set was already fixed in this process", level_name(level));
  }
}

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kLength: return "length";
    case FinishReason::kStop: return "stop";
    case FinishReason::kStopString: return "stop_string";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kDeadline: return "deadline";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

Engine::Engine(const EngineOptions& options) : options_(options), seed_source_(std::random_device{}()) {
  validate(options_);
  // The loop thread loads the model too, so that it is the only thread of the process that ever
  // runs OpenMP work. libgomp keeps one pool of workers per thread that has opened a parallel
  // region, and once it manages more threads than there are cores its workers stop spinning
  // between regions after a few microseconds and sleep on a futex instead, and a decode step
  // opens some sixty regions (docs/configuration.md's Threads note has the measurement).
  std::promise<void> loaded;
  std::future<void> ready = loaded.get_future();
  // num_threads 0: the CPUs this process may really use (affinity and cgroup quota), not every
  // CPU of the node.
  if (options_.model.num_threads > 0) {
    info_.num_threads = options_.model.num_threads;
    info_.threads_reason = "model.num_threads";
  } else {
    const CpuBudget budget = cpu_budget();
    info_.num_threads = budget.threads;
    info_.threads_reason = budget.reason;
  }
  thread_ = std::thread([this, loaded = std::move(loaded)]() mutable {
    omp_set_num_threads(info_.num_threads);
    try {
      load();
    } catch (...) {
      loaded.set_exception(std::current_exception());
      return;
    }
    loaded.set_value();
    loop();
  });
  try {
    ready.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

void Engine::load() {
  file_ = std::make_unique<GgufFile>(options_.model.path);
  tokenizer_ = std::make_unique<Tokenizer>(*file_);
  grammars_ = std::make_unique<grammar::GrammarCache>(make_token_index(*tokenizer_), kCompiledGrammars);
  special_grammars_ = std::make_unique<grammar::GrammarCache>(make_token_index(*tokenizer_, true), kCompiledGrammars);
  chat_template_ = std::make_unique<ChatTemplate>(*file_, *tokenizer_, options_.model.chat_template_file);
  info_.chat_template = chat_template_->origin();
  if (!chat_template_->error().empty()) {
    info_.chat_template += "; UNUSABLE: " + chat_template_->error();
  } else {
    const ToolCallTurnForm& f = chat_template_->tool_call_turn_form();
    info_.chat_template += std::string("; tool calls: ") + tool_format_name(chat_template_->tool_format()) +
                           " (a call turn's content " + (f.content_empty ? "\"\"" : "null") + ", arguments as " +
                           (f.arguments_object ? "an object" : "a string") + ")";
    if (!chat_template_->reasoning().open.empty()) info_.chat_template += "; reasoning: " + chat_template_->reasoning().open;
  }
  const KernelLevel best = best_supported_level();
  KernelLevel level = best;
  if (options_.model.kernels != "auto") {
    level = *parse_level(options_.model.kernels);
    if (!cpu_supports(level))
      throw ConfigError("model.kernels: this CPU cannot run the " + options_.model.kernels + " kernels (the best it runs is " +
                        level_name(best) + ")");
  }
  if (level < KernelLevel::kAvx512 && best == KernelLevel::kAvx512) limit_onednn_isa(level);
  const ModelLoadOptions load_options{.weights = {.keep_bf16 = options_.model.keep_bf16,
                                                 .int8_activations = options_.model.int8_activations,
                                                 .repack = options_.model.repack_weights},
                                     .kernels = &kernel_table(level)};
  model_ = load_model(*file_, load_options);
  info_.kernels = level_name(level);
  exp_array_ = kernel_table(level).exp_array;
  const ModelHparams& hp = model_->hparams();
  if (tokenizer_->vocab_size() != hp.n_vocab)
    throw ConfigError(options_.model.path + ": tokenizer has " + std::to_string(tokenizer_->vocab_size()) +
                      " tokens but token_embd.weight has " + std::to_string(hp.n_vocab) + " rows");

  SchedulerOptions& so = options_.scheduler;
  if (so.max_model_len == 0) so.max_model_len = hp.n_ctx_train;
  if (so.max_model_len > hp.n_ctx_train)
    throw ConfigError("scheduler.max_model_len: " + std::to_string(so.max_model_len) +
                      " exceeds the model's context length " + std::to_string(hp.n_ctx_train));

  KvShape shape = model_->kv_shape();
  if (options_.cache.dtype == "f16") shape.element_bytes = 2;
  if (options_.cache.dtype == "q8_0") {
    shape.element_bytes = 1;
    if (int64_t{shape.n_kv_heads} * shape.head_dim % kKvQ8Group != 0)
      throw ConfigError("cache.dtype: \"q8_0\" stores each token's K and V rows in blocks of 32 values, but this "
                        "model's rows have " + std::to_string(int64_t{shape.n_kv_heads} * shape.head_dim) +
                        " (KV heads x head dim); use \"f16\"");
  }
  const int32_t bs = options_.cache.block_size;
  // Layers with a window shorter than the longest request keep blocks of their own, released
  // as the window moves on (kv_cache/kv_layout.h).
  KvLayout layout = options_.cache.release_windowed_blocks
                        ? KvLayout::plan(hp.layer_windows, so.max_model_len)
                        : KvLayout::single(hp.n_layer);
  const int64_t block_bytes = shape.bytes_per_token() / shape.n_layers * layout.layers_per_group * bs;
  int64_t num_blocks = options_.cache.num_blocks;
  // A draft model's cache takes its share of the budget; the model's gets the rest.
  const double draft_share = options_.speculative.method == "draft" ? options_.speculative.draft_cache_share : 0.0;
  if (num_blocks == 0) {
    num_blocks = static_cast<int64_t>(static_cast<double>(options_.cache.memory_bytes) * (1.0 - draft_share)) / block_bytes;
    if (num_blocks < 1)
      throw ConfigError("cache.memory_bytes: " + std::to_string(options_.cache.memory_bytes) +
                        " bytes hold no block of " + std::to_string(block_bytes) + " bytes");
    num_blocks = std::min<int64_t>(num_blocks, int64_t{1} << 30);
  }
  kv_ = std::make_unique<KvStorage>(shape, bs, static_cast<int32_t>(num_blocks), layout);
  alloc_ = std::make_unique<BlockAllocator>(kv_->num_blocks());
  scheduler_ = std::make_unique<Scheduler>(so, *alloc_, bs, options_.cache.enable_prefix_caching, layout);
  options_.cache.num_blocks = kv_->num_blocks();
  load_proposer(load_options, shape.element_bytes,
                static_cast<int64_t>(static_cast<double>(kv_->total_bytes()) * draft_share / (1.0 - draft_share)));

  info_.architecture = hp.architecture;
  info_.name = hp.name;
  info_.weight_type = hp.file_types;
  info_.weights_held_as = hp.held_types;
  info_.matmul_plan = hp.matmul_plan;
  info_.weight_bytes_per_step = hp.bytes_per_step;
  info_.weight_bytes = hp.weight_bytes;
  info_.expert_bytes = hp.expert_bytes;
  info_.n_expert = hp.n_expert;
  info_.n_expert_used = hp.n_expert_used;
  info_.n_params = hp.n_params;
  info_.n_layer = hp.n_layer;
  info_.n_head = hp.n_head;
  info_.n_head_kv = hp.n_head_kv;
  info_.head_dim = hp.head_dim;
  info_.n_embd = hp.n_embd;
  info_.n_ff = hp.n_ff;
  info_.n_vocab = hp.n_vocab;
  info_.n_ctx_train = hp.n_ctx_train;
  info_.max_model_len = so.max_model_len;
  info_.block_size = bs;
  info_.num_blocks = kv_->num_blocks();
  info_.token_capacity = kv_->token_capacity();
  info_.kv_element_bytes = shape.element_bytes;
  info_.kv_element_size = shape.element_size();
  info_.kv_bytes_per_token = shape.bytes_per_token();
  info_.mla = hp.mla;
  if (hp.mla.on()) {
    KvShape per_head = shape;  // each head's K and V rows, as one KV head of their summed width
    per_head.v_in_k = 0;
    per_head.n_kv_heads = hp.n_head;
    per_head.head_dim = hp.mla.qk_nope_dim + hp.mla.qk_rope_dim + hp.mla.v_head_dim;
    info_.kv_bytes_per_token_multi_head = per_head.bytes_per_token() / 2;
  }
  info_.kv_total_bytes = kv_->total_bytes();
  info_.sliding_window = hp.sliding_window;
  info_.kv_layout = layout.describe();
  info_.kv_groups = layout.n_groups();
  {  // what one full-length request holds at once, split between windowed and full layers
    const int64_t held = scheduler_->max_blocks_held(so.max_model_len);
    for (int32_t g = 0; g < layout.n_groups(); ++g) {
      const int64_t token_layers = layout.blocks_held(g, so.max_model_len, bs, so.max_num_batched_tokens) * bs *
                                   layout.layers_per_group;
      (layout.group_window[g] > 0 ? info_.kv_request_token_layers_windowed : info_.kv_request_token_layers_full) +=
          token_layers;
      (layout.group_window[g] > 0 ? info_.kv_windowed_layers : info_.kv_full_layers) += layout.layers_per_group;
    }
    info_.kv_blocks_per_request = held;
    info_.kv_bytes_per_request = held * kv_->bytes_per_block();
    // In positions of every layer: what a full-attention request of this many tokens would hold.
    info_.kv_tokens_per_request = std::min<int64_t>(so.max_model_len, held * bs / layout.n_groups());
    info_.max_concurrency = static_cast<double>(kv_->token_capacity()) / info_.kv_tokens_per_request;
  }
  {  // the longest request the whole cache can hold (blocks held grow with length)
    int64_t lo = 0, hi = so.max_model_len;
    while (lo < hi) {
      const int64_t mid = (lo + hi + 1) / 2;
      if (scheduler_->max_blocks_held(mid) <= kv_->num_blocks()) lo = mid; else hi = mid - 1;
    }
    info_.max_request_tokens = static_cast<int32_t>(lo);
  }
  KvShapeFacts facts{hp.n_layer, hp.n_head, hp.n_head_kv, hp.head_dim, shape.element_bytes, bs,
                     so.max_model_len, kv_->total_bytes()};
  facts.q8 = shape.q8();
  facts.as_is_bytes_per_token = shape.bytes_per_token();
  if (hp.mla.on()) {  // the model's own latent widths, and its heads' K and V widths for the other rows
    facts.mla_latent = hp.mla.kv_lora_rank;
    facts.mla_rope = hp.mla.qk_rope_dim;
    facts.head_dim = hp.mla.qk_nope_dim + hp.mla.qk_rope_dim;
    facts.v_head_dim = hp.mla.v_head_dim;
    facts.n_head_kv = hp.n_head;
  }
  facts.tokens_held = info_.kv_tokens_per_request;
  info_.kv_what_if = kv_what_if(facts);

  // A step runs 1..max_num_batched_tokens rows; their (padded) heights are few, so every
  // primitive is ready before the first request and none is compiled mid-step.
  model_->warm_up(so.max_num_batched_tokens);
  publish_stats();
}

Engine::~Engine() { shutdown(Shutdown::kAbort); }

std::string Engine::validate_request(const Request& r) const {
  return kvserve::validate_request(r, {.vocab_size = tokenizer_->vocab_size(),
                                      .max_model_len = info_.max_model_len,
                                      .n_layer = info_.n_layer,
                                      .n_head = info_.n_head});
}

namespace {

// FNV-1a of the salt, never 0 (the unsalted chain's root): a salted chain starts elsewhere,
// and the cache's lookup compares the parent too, so two salts never share a block.
uint64_t salt_root(const std::string& salt) {
  if (salt.empty()) return 0;
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : salt) h = (h ^ c) * 1099511628211ull;
  return h | 1;
}

}  // namespace

std::shared_ptr<const grammar::TokenIndex> make_token_index(const Tokenizer& tok, bool special) {
  std::vector<std::string> bytes(static_cast<size_t>(tok.vocab_size()));
  const std::vector<int32_t>& eog = tok.end_of_generation_ids();
  for (int32_t t = 0; t < tok.vocab_size(); ++t) {
    const TokenKind k = tok.token_kind(t);
    if (k == TokenKind::kNormal || k == TokenKind::kByte || k == TokenKind::kUserDefined) bytes[t] = tok.token_bytes(t);
    if (special && k == TokenKind::kControl && std::find(eog.begin(), eog.end(), t) == eog.end())
      bytes[t] = tok.token_text(t);
  }
  return std::make_shared<const grammar::TokenIndex>(std::move(bytes), tok.end_of_generation_ids());
}

SubmitResult Engine::submit(Request request, std::shared_ptr<ResultSink> sink) {
  if (!accepting_) return {SubmitCode::kShuttingDown, 0, "server is shutting down"};
  if (std::string err = validate_request(request); !err.empty()) return {SubmitCode::kInvalidArgument, 0, err};
  const int64_t prompt_len = static_cast<int64_t>(request.prompt.size());
  const int64_t max_total = prompt_len + request.sampling.max_new_tokens;
  if (std::string err = scheduler_->check_fits(prompt_len, max_total); !err.empty())
    return {SubmitCode::kNeverFits, 0, err};

  const uint64_t id = next_id_++;
  auto seq = std::make_unique<Sequence>(id, std::move(request), options_.cache.block_size, kv_->layout().n_groups());
  seq->max_tokens = static_cast<int32_t>(max_total);
  seq->prefix_root = salt_root(seq->request.cache_salt);
  seq->sink = std::move(sink);
  seq->text = std::make_unique<OutputText>(*tokenizer_, seq->request.prompt, seq->request.sampling.stop,
                                           seq->request.sampling.special_text);
  if (seq->request.sampling.constraint.active()) {
    try {
      grammar::GrammarCache& cache = seq->request.sampling.special_text ? *special_grammars_ : *grammars_;
      seq->matcher = std::make_unique<grammar::GrammarMatcher>(cache.get(seq->request.sampling.constraint));
    } catch (const grammar::GrammarError& e) {
      return {SubmitCode::kInvalidArgument, 0, std::string("sampling.constraint: ") + e.what()};
    }
  }
  seq->submitted = Sequence::Clock::now();
  prepare_inspection(seq.get());
  if (seq->request.deadline_ms > 0)
    seq->deadline = seq->submitted + std::chrono::milliseconds(seq->request.deadline_ms);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_ || stop_) return {SubmitCode::kShuttingDown, 0, "server is shutting down"};
    const bool interactive = seq->request.priority == Priority::kInteractive;
    if (interactive && waiting_ + inbox_submits_ >= options_.scheduler.max_waiting)
      return {SubmitCode::kOverloaded, 0,
              "overloaded: " + std::to_string(options_.scheduler.max_waiting) + " requests already waiting"};
    const uint64_t seed = seq->request.sampling.seed ? *seq->request.sampling.seed : seed_source_();
    seq->sampler = std::make_unique<Sampler>(seq->request.sampling, seed, exp_array_);
    inbox_.emplace_back(std::move(seq));
    if (interactive) ++inbox_submits_;
    ++inbox_sequences_;
  }
  wake_.notify_one();
  return {SubmitCode::kOk, id, {}};
}

void Engine::prepare_inspection(Sequence* seq) const {
  const InspectOptions& in = seq->request.inspect;
  // Scoring the prompt needs every prompt row computed, so it cannot start from cached blocks.
  if (!in.active() && seq->request.sampling.prompt_logprobs < 0) return;
  seq->shares_cache = false;
  if (in.capture_attention) {
    auto cap = std::make_shared<AttentionCapture>();
    cap->n_layer = info_.n_layer;
    cap->n_head = info_.n_head;
    cap->n_tokens = seq->num_prompt;
    cap->probs.assign(static_cast<size_t>(cap->n_layer) * cap->n_head * cap->n_tokens * cap->n_tokens, 0.0f);
    seq->capture = std::move(cap);
  }
  if (!in.ablate_heads.empty()) {
    seq->head_mask.assign(static_cast<size_t>(info_.n_layer) * info_.n_head, 0);
    for (const HeadRef& h : in.ablate_heads) seq->head_mask[h.layer * info_.n_head + h.head] = 1;
  }
  const int32_t prompt_top = seq->request.sampling.prompt_logprobs;
  if (in.score_prompt || prompt_top >= 0) {
    seq->prompt_logprobs.assign(seq->num_prompt > 0 ? seq->num_prompt - 1 : 0, 0.0f);
    seq->max_chunk = options_.scheduler.max_scored_tokens_per_step;
  }
  if (prompt_top >= 0) seq->prompt_token_logprobs.resize(seq->prompt_logprobs.size());
}

void Engine::cancel(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.emplace_back(Cancel{id});
  }
  wake_.notify_one();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void Engine::shutdown(Shutdown mode, std::chrono::milliseconds grace) {
  accepting_ = false;
  if (mode == Shutdown::kDrain) {
    std::unique_lock<std::mutex> lock(mu_);
    idle_.wait_for(lock, grace, [&] { return live_ == 0 && inbox_sequences_ == 0; });
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!stop_) inbox_.emplace_back(AbortAll{});
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Engine::take_inbox(std::vector<Message>& msgs) {
  for (auto& m : msgs) {
    if (auto* s = std::get_if<std::unique_ptr<Sequence>>(&m)) {
      Sequence* seq = s->get();
      seqs_.emplace(seq->id, std::move(*s));
      scheduler_->add(seq);
    } else if (auto* c = std::get_if<Cancel>(&m)) {
      auto it = seqs_.find(c->id);
      if (it != seqs_.end()) finish(it->second.get(), FinishReason::kCancelled);
    } else {
      while (!seqs_.empty()) finish(seqs_.begin()->second.get(), FinishReason::kCancelled);
    }
  }
}

void Engine::set_kv_event_listener(std::shared_ptr<KvEventListener> listener) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    kv_listener_ = std::move(listener);
  }
  wake_.notify_one();
}

void Engine::loop() {
  std::vector<Message> msgs;
  std::shared_ptr<KvEventListener> kv_listener;
  for (;;) {
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return !inbox_.empty() || stop_ || !seqs_.empty() || kv_listener != kv_listener_; });
      msgs.swap(inbox_);
      inbox_submits_ = 0;
      inbox_sequences_ = 0;
      stopping = stop_;
      if (kv_listener_ && !kv_listener) alloc_->record_events();
      kv_listener = kv_listener_;
    }
    take_inbox(msgs);
    msgs.clear();
    live_ = static_cast<int32_t>(seqs_.size());
    if (stopping && seqs_.empty()) break;
    if (!seqs_.empty()) {
      const auto t0 = Sequence::Clock::now();
      step();
      busy_seconds_ += seconds_between(t0, Sequence::Clock::now());
    }
    live_ = static_cast<int32_t>(seqs_.size());
    waiting_ = static_cast<int32_t>(scheduler_->waiting().size());
    if (std::vector<CacheEvent> events = alloc_->take_events(); kv_listener) {
      if (!events.empty()) {
        const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        kv_listener->on_kv_events({now, options_.cache.block_size, std::move(events)});
      }
    }
    publish_stats();
    if (live_ == 0) idle_.notify_all();
  }
  publish_stats();
  idle_.notify_all();
}

void Engine::step() {
  const auto now = Sequence::Clock::now();
  std::vector<Sequence*> expired;
  for (auto& [id, seq] : seqs_)
    if (now >= seq->deadline) expired.push_back(seq.get());
  for (Sequence* seq : expired) finish(seq, FinishReason::kDeadline);

  propose_drafts();
  SchedulerOutput plan = scheduler_->schedule();
  if (plan.chunks.empty()) return;
  ++steps_total_;
  build_batch(plan);
  const float* logits = nullptr;
  try {
    const auto t0 = Sequence::Clock::now();
    logits = model_->forward(batch_, *kv_);
    const double forward = seconds_between(t0, Sequence::Clock::now());
    forward_seconds_ += forward;
    if (proposer_) note_decode_pass(plan, forward);
  } catch (const std::exception& e) {
    spdlog::error("forward step failed: {}", e.what());
    for (const auto& c : plan.chunks) finish(c.seq, FinishReason::kError, std::string("forward failed: ") + e.what());
    return;
  }
  // The logits come in the order build_batch asked for them: per chunk, its scored prompt rows,
  // then its sampled row (and one per proposed token after it).
  const float* rows = logits;
  for (const auto& c : plan.chunks) {
    // Where this chunk's rows end, known before it is advanced, so that a chunk whose
    // advance throws ends alone (an error event) and the others still get their rows.
    const float* end = rows + (scored_rows(c) + (c.samples ? 1 + c.n_draft : 0)) * int64_t{info_.n_vocab};
    const uint64_t id = c.seq->id;
    try {
      advance(c, rows);
    } catch (const std::exception& e) {
      spdlog::error("request {}: step failed: {}", id, e.what());
      if (auto it = seqs_.find(id); it != seqs_.end())
        finish(it->second.get(), FinishReason::kError, std::string("step failed: ") + e.what());
    }
    rows = end;
  }
}

void Engine::build_batch(const SchedulerOutput& plan) {
  batch_.clear();
  const int32_t groups = kv_->layout().n_groups();
  const int64_t n_seqs = static_cast<int64_t>(plan.chunks.size());
  int32_t max_blocks = 0;
  for (const auto& c : plan.chunks)
    for (const BlockTable& t : c.seq->tables) max_blocks = std::max<int32_t>(max_blocks, static_cast<int32_t>(t.blocks().size()));
  batch_.max_blocks = max_blocks;
  batch_.block_tables.assign(groups * n_seqs * max_blocks, 0);
  bool inspecting = false;
  for (const auto& c : plan.chunks) inspecting |= c.seq->capture || !c.seq->head_mask.empty();
  for (int64_t i = 0; i < n_seqs; ++i) {
    const ScheduledChunk& c = plan.chunks[i];
    Sequence& s = *c.seq;
    for (int32_t g = 0; g < groups; ++g)
      std::copy(s.tables[g].blocks().begin(), s.tables[g].blocks().end(),
                batch_.block_tables.begin() + (g * n_seqs + i) * max_blocks);
    const int32_t first_row = static_cast<int32_t>(batch_.tokens.size());
    const int64_t n_known = static_cast<int64_t>(s.tokens.size());
    for (int64_t p = s.num_computed; p < s.num_computed + c.n_tokens; ++p) {
      batch_.tokens.push_back(p < n_known ? s.tokens[p] : s.draft[p - n_known]);
      batch_.positions.push_back(static_cast<int32_t>(p));
      batch_.token_seq.push_back(static_cast<int32_t>(i));
      if (inspecting) {
        const bool captured = s.capture && p < s.num_prompt;
        const int64_t n = captured ? s.capture->n_tokens : 0;
        batch_.attn_capture.push_back(captured ? s.capture->probs.data() + p * n : nullptr);
        batch_.attn_capture_len.push_back(static_cast<int32_t>(n));
        batch_.head_mask.push_back(s.head_mask.empty() ? nullptr : s.head_mask.data());
      }
      // A scored prompt needs the logits of every prompt row that predicts another prompt token.
      if (!s.prompt_logprobs.empty() && p + 1 < s.num_prompt)
        batch_.logit_rows.push_back(first_row + static_cast<int32_t>(p - s.num_computed));
    }
    if (c.samples)
      for (int32_t r = c.n_draft; r >= 0; --r) batch_.logit_rows.push_back(static_cast<int32_t>(batch_.tokens.size()) - 1 - r);
  }
  // Slots group after group: each group's block table places the same positions elsewhere.
  batch_.slots.reserve(groups * batch_.tokens.size());
  for (int32_t g = 0; g < groups; ++g)
    for (const auto& c : plan.chunks)
      for (int64_t p = c.seq->num_computed; p < c.seq->num_computed + c.n_tokens; ++p)
        batch_.slots.push_back(c.seq->tables[g].slot(p));
}

const float* Engine::advance(const ScheduledChunk& c, const float* logits) {
  const int32_t V = info_.n_vocab;
  Sequence& s = *c.seq;
  prompt_tokens_total_ += std::clamp<int64_t>(s.num_prompt - s.num_computed, 0, c.n_tokens);
  if (!s.prompt_logprobs.empty()) {
    const int64_t scored = scored_rows(c);
    score_prompt_rows(s, s.num_computed, scored, logits);
    logits += scored * V;
  }
  s.num_computed += c.n_tokens - c.n_draft;
  s.peak_blocks = std::max<int32_t>(s.peak_blocks, s.blocks_held());
  if (c.n_draft > 0) {
    verify(c, logits);
    return logits + (1 + c.n_draft) * int64_t{V};
  }
  scheduler_->after_step(&s);
  if (!c.samples) return logits;
  int32_t token;
  emit(s, logits, -1, &token);
  return logits + V;
}

bool Engine::emit(Sequence& s, const float* raw, int32_t draft, int32_t* token_out) {
  const int32_t V = info_.n_vocab;
  *token_out = -1;
  scratch_logits_.assign(raw, raw + V);
  const std::span<const int32_t> generated(s.tokens.data() + s.num_prompt, s.tokens.size() - s.num_prompt);
  if (!constrain(s, scratch_logits_.data())) return false;
  const int32_t token = draft < 0 ? s.sampler->sample(scratch_logits_.data(), V, s.tokens, generated)
                                  : s.sampler->sample_against(scratch_logits_.data(), V, s.tokens, generated, draft);
  if (token < 0) {
    finish(&s, FinishReason::kError, "the model produced no finite logit at position " + std::to_string(s.tokens.size()));
    return false;
  }
  *token_out = token;

  Event ev;
  ev.id = s.id;
  ev.token_ids.push_back(token);
  const SamplingParams& sp = s.request.sampling;
  if (sp.logprobs || sp.top_logprobs > 0)
    ev.logprobs.push_back(Sampler::logprobs(raw, V, token, sp.top_logprobs, exp_array_));
  if (s.num_generated() == 0) s.first_token = Sequence::Clock::now();
  s.tokens.push_back(token);
  ++generation_tokens_total_;

  if (s.matcher && !s.matcher->accept(token)) {
    finish(&s, FinishReason::kError, "the sampled token " + std::to_string(token) + " is outside the grammar");
    return false;
  }
  // A grammar that took an end-of-generation token is complete: that ends the request even
  // with ignore_eos.
  const bool eos = (tokenizer_->is_end_of_generation(token) && !sp.ignore_eos) || (s.matcher && s.matcher->ended());
  const bool stop_token = std::find(sp.stop_token_ids.begin(), sp.stop_token_ids.end(), token) != sp.stop_token_ids.end();
  if (eos || stop_token) {
    finish(&s, FinishReason::kStop, {}, std::move(ev));
    return false;
  }
  ev.text = s.text->push(token);
  if (s.text->stopped()) {
    finish(&s, FinishReason::kStopString, {}, std::move(ev));
    return false;
  }
  if (s.num_generated() >= sp.max_new_tokens || static_cast<int32_t>(s.tokens.size()) >= s.max_tokens) {
    finish(&s, FinishReason::kLength, {}, std::move(ev));
    return false;
  }
  const uint64_t id = s.id;
  deliver(s, std::move(ev));
  return seqs_.count(id) > 0;  // a sink that failed ended it
}

bool Engine::constrain(Sequence& s, float* logits) {
  const SamplingParams& sp = s.request.sampling;
  for (const auto& [t, b] : sp.logit_bias) logits[t] += b;
  if (!s.matcher) return true;
  try {
    s.matcher->fill_mask(s.mask);
  } catch (const grammar::GrammarError& e) {
    finish(&s, FinishReason::kError, std::string("sampling.constraint: ") + e.what());
    return false;
  }
  const int32_t V = info_.n_vocab;
  bool any = false;
  for (int32_t w = 0; w * 64 < V; ++w) {
    const uint64_t bits = s.mask[w];
    any |= bits != 0;
    if (bits == ~uint64_t{0}) continue;
    const int32_t end = std::min(V, (w + 1) * 64);
    for (int32_t t = w * 64; t < end; ++t)
      if (!((bits >> (t - w * 64)) & 1)) logits[t] = -INFINITY;
  }
  if (!any) {  // the vocabulary cannot continue the grammar (and has no end token where it could end)
    if (s.matcher->complete()) {
      finish(&s, FinishReason::kStop);
    } else {
      finish(&s, FinishReason::kError, "sampling.constraint: no token of the vocabulary continues the grammar here");
    }
    return false;
  }
  return true;
}

// The prompt rows of a chunk whose logits score the next prompt token (a scored prompt only).
int64_t Engine::scored_rows(const ScheduledChunk& c) {
  const Sequence& s = *c.seq;
  return s.prompt_logprobs.empty() ? 0 : std::clamp<int64_t>(s.num_prompt - 1 - s.num_computed, 0, c.n_tokens);
}

void Engine::score_prompt_rows(Sequence& s, int64_t first_pos, int64_t n_rows, const float* logits) {
  const int32_t V = info_.n_vocab;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* l = logits + r * V;
    const int64_t p = first_pos + r;
    const int32_t next = s.tokens[p + 1];
    if (s.prompt_token_logprobs.empty()) {
      s.prompt_logprobs[p] = LogSoftmax(l, V, exp_array_).of(l, next);
    } else {
      s.prompt_token_logprobs[p] = Sampler::logprobs(l, V, next, s.request.sampling.prompt_logprobs, exp_array_);
      s.prompt_logprobs[p] = s.prompt_token_logprobs[p].logprob;
    }
  }
}

void Engine::finish(Sequence* seq, FinishReason reason, std::string error, Event event) {
  const auto now = Sequence::Clock::now();
  event.id = seq->id;
  if (seq->text && reason != FinishReason::kError) event.text += seq->text->finish();
  Completion c;
  c.reason = reason;
  c.error = std::move(error);
  c.prompt_tokens = seq->num_prompt;
  c.completion_tokens = seq->num_generated();
  c.preemptions = seq->preemptions;
  c.cached_prompt_tokens = seq->cached_prompt_tokens;
  c.total_time_s = seconds_between(seq->submitted, now);
  c.time_to_first_token_s = seq->num_generated() > 0 ? seconds_between(seq->submitted, seq->first_token) : 0.0;
  c.peak_kv_bytes = int64_t{seq->peak_blocks} * kv_->bytes_per_block();
  for (float lp : seq->prompt_logprobs) c.prompt_logprob_sum += lp;
  c.prompt_logprob_count = static_cast<int32_t>(seq->prompt_logprobs.size());
  // A request ended during its prompt reports the rows computed so far.
  const int64_t scored = std::max<int64_t>(0, std::min<int64_t>(seq->num_computed, seq->num_prompt) - 1);
  if (static_cast<int64_t>(seq->prompt_token_logprobs.size()) > scored) seq->prompt_token_logprobs.resize(scored);
  c.prompt_logprobs = std::move(seq->prompt_token_logprobs);
  if (reason != FinishReason::kError && reason != FinishReason::kCancelled && reason != FinishReason::kDeadline)
    c.attention = seq->capture;
  event.completion = c;
  scheduler_->remove(seq);
  if (proposer_) proposer_->forget(seq->id);
  ++finished_total_;
  deliver(*seq, std::move(event));
  seqs_.erase(seq->id);
}

void Engine::deliver(Sequence& seq, Event event) {
  if (!seq.sink) return;
  const bool final = event.completion.has_value();
  try {
    seq.sink->on_event(std::move(event));
    return;
  } catch (const std::exception& e) {
    spdlog::error("request {}: its result sink failed: {}", seq.id, e.what());
  } catch (...) {
    spdlog::error("request {}: its result sink failed", seq.id);
  }
  // The front end could not take the event: the request ends here with an error (one more
  // try at a final event), and a sink that fails again is dropped, never the loop.
  if (final) {
    seq.sink.reset();
  } else {
    finish(&seq, FinishReason::kError, "the front end could not deliver a result");
  }
}

void Engine::publish_stats() {
  EngineStats s;
  if (scheduler_) {
    s.running = static_cast<int32_t>(scheduler_->running().size());
    s.waiting = static_cast<int32_t>(scheduler_->waiting().size());
    s.waiting_background = static_cast<int32_t>(scheduler_->background_waiting().size());
    s.preemptions_total = scheduler_->preemptions_total();
    for (Sequence* q : scheduler_->running()) s.tokens_cached += q->num_computed;
    s.prefix_caching = scheduler_->prefix_caching();
    s.prompt_tokens_admitted = scheduler_->prompt_tokens_admitted();
    s.prompt_tokens_from_cache = scheduler_->prompt_tokens_cached();
    s.prefix_cache_hit_rate = s.prompt_tokens_admitted
                                  ? static_cast<double>(s.prompt_tokens_from_cache) / s.prompt_tokens_admitted
                                  : 0.0;
  }
  s.cached_blocks = alloc_->num_cached();
  s.evictions_total = alloc_->evictions();
  s.blocks_total = alloc_->num_blocks();
  s.blocks_free = alloc_->num_free();
  s.blocks_used = alloc_->num_used();
  s.kv_usage = static_cast<double>(s.blocks_used) / s.blocks_total;
  s.prompt_tokens_total = prompt_tokens_total_;
  s.generation_tokens_total = generation_tokens_total_;
  s.requests_finished_total = finished_total_;
  s.steps_total = steps_total_;
  s.busy_seconds_total = busy_seconds_;
  s.forward_seconds_total = forward_seconds_;
  s.spec_drafts_total = spec_drafts_total_;
  s.spec_draft_tokens_total = spec_draft_tokens_total_;
  s.spec_accepted_tokens_total = spec_accepted_tokens_total_;
  if (draft_) {
    s.draft_blocks_total = draft_->num_blocks();
    s.draft_blocks_free = draft_->blocks_free();
  }
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_ = s;
}

}  // namespace kvserve
