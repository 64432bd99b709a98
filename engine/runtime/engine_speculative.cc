// Speculative decoding inside the step loop: proposals before scheduling, verification after the
// forward pass. The scheduler fits the proposed tokens into the step (scheduler.cc); the sampler
// accepts or replaces each one (Sampler::sample_against).
#include <algorithm>

#include <spdlog/spdlog.h>

#include "runtime/engine.h"
#include "sampling/sampler.h"
#include "speculative/draft_model.h"
#include "speculative/ngram_proposer.h"

namespace kvserve {
namespace {

// What one more verified row is assumed to add to a decode pass, as a share of it, until passes
// of that many rows have been timed (pass_cost): a low guess, so that longer proposals get tried
// and timed (kvserve-bench-speculative --part cost measures 0.03-0.25 by model and weight type).
constexpr double kVerifyRowCost = 0.06;
// Each verification's weight against the older ones in a sequence's acceptance counts.
constexpr float kFade = 0.9f;
// The acceptance rate a sequence starts from, and how many tokens' worth of evidence that is.
constexpr double kPriorRate = 0.7, kPriorWeight = 2.0;
// Steps that propose between two that do not (the one-row pass they are weighed against).
constexpr int64_t kPlainPassEvery = 64;
// Steps without proposals when proposing does not pay; doubled while it goes on not paying.
constexpr int32_t kFirstPause = 8, kLongestPause = 64;

// Tokens per unit of time with k proposed tokens, against 1 without: each accepted with
// probability a (1 + a + ... + a^k tokens a pass) for a pass of 1 + k rows that costs
// `verify_cost` passes of one row, and k proposing passes of `draft_cost` each.
double gain(double a, int32_t k, double verify_cost, double draft_cost) {
  double tokens = 0, p = 1;
  for (int32_t i = 0; i <= k; ++i, p *= a) tokens += p;
  return tokens / (verify_cost + k * draft_cost);
}

// Greedy requests get the same tokens whatever is proposed (Sampler: exactly greedy below this).
bool is_greedy(const SamplingParams& p) { return p.temperature < kGreedyBelowTemperature; }

}  // namespace

int32_t Engine::proposal_length(const Sequence& s, int64_t base_rows) const {
  const double a = (s.draft_hits + kPriorRate * kPriorWeight) / (s.draft_hits + s.draft_misses + kPriorWeight);
  // Greedy output is the same whatever is proposed, so its lengths may follow the clock. A
  // sampled request's draws depend on what was proposed, so that a seed repeats its tokens its
  // lengths follow only its own acceptance and fixed costs: kVerifyRowCost a row, and a draft
  // pass at the draft's share of the bytes a step streams.
  const bool timed = is_greedy(s.request.sampling);
  const double base = pass_seconds_by_rows_[base_rows];  // base_rows <= max_batch: inside the table
  const double draft_cost = !timed ? draft_bytes_share_ : base > 0 ? proposer_->pass_seconds() / base : 0.0;
  int32_t best = 0;
  double best_gain = 1.0;
  for (int32_t k = 1; k <= options_.speculative.num_tokens; ++k) {
    const double verify_cost = timed ? pass_cost(base_rows, base_rows + k) : 1.0 + kVerifyRowCost * k;
    const double g = gain(a, k, verify_cost, draft_cost);
    if (g > best_gain) best = k, best_gain = g;
  }
  return best;
}

double Engine::pass_cost(int64_t base_rows, int64_t rows) const {
  const std::vector<double>& t = pass_seconds_by_rows_;
  const int64_t last = static_cast<int64_t>(t.size()) - 1;
  if (base_rows > last || t[base_rows] <= 0) return 1.0 + kVerifyRowCost * static_cast<double>(rows - base_rows);
  // The nearest count at or below `rows` that has been timed, plus the guess for the rest.
  for (int64_t r = std::min(rows, last); r > base_rows; --r)
    if (t[r] > 0) return std::max(1.0, t[r] / t[base_rows]) + kVerifyRowCost * static_cast<double>(rows - r);
  return 1.0 + kVerifyRowCost * static_cast<double>(rows - base_rows);
}

void Engine::note_decode_pass(const SchedulerOutput& plan, double seconds) {
  int64_t rows = 0, drafts = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    if (c.n_tokens - c.n_draft != 1 || c.seq->num_computed + 1 != static_cast<int64_t>(c.seq->tokens.size())) return;
    rows += c.n_tokens;
    drafts += c.n_draft;
  }
  if (rows < static_cast<int64_t>(pass_seconds_by_rows_.size())) {
    double& avg = pass_seconds_by_rows_[rows];
    avg = avg > 0 ? 0.9 * avg + 0.1 * seconds : seconds;
  }
  steps_since_plain_pass_ = drafts == 0 ? 0 : steps_since_plain_pass_ + 1;
}

void Engine::load_proposer(const ModelLoadOptions& load, int32_t kv_element_bytes, int64_t draft_cache_bytes) {
  const SpeculativeOptions& spec = options_.speculative;
  pass_seconds_by_rows_.assign(static_cast<size_t>(spec.max_batch) * (1 + spec.num_tokens) + 1, 0.0);
  const std::string common = "up to " + std::to_string(spec.num_tokens) + " proposed tokens per step, in steps of at most " +
                             std::to_string(spec.max_batch) + " sequences";
  if (spec.method == "ngram") {
    proposer_ = std::make_unique<NgramProposer>(NgramProposerOptions{spec.ngram_min, spec.ngram_max});
    info_.speculative = "ngram (suffixes of " + std::to_string(spec.ngram_min) + "-" + std::to_string(spec.ngram_max) +
                        " tokens; " + common + ")";
  } else if (spec.method == "draft") {
    auto draft = std::make_unique<DraftModelProposer>(
        DraftModelOptions{.path = spec.draft_model,
                          .cache_bytes = draft_cache_bytes,
                          .block_size = options_.cache.block_size,
                          .element_bytes = kv_element_bytes,
                          .max_rows = options_.scheduler.max_num_batched_tokens,
                          .load = load},
        *tokenizer_);
    draft_ = draft.get();
    const ModelHparams& hp = draft->hparams();
    info_.draft_name = hp.name;
    info_.draft_n_params = hp.n_params;
    info_.draft_num_blocks = draft->num_blocks();
    info_.draft_kv_bytes = draft->cache_bytes();
    info_.speculative = "draft " + spec.draft_model + " (" + hp.architecture + " \"" + hp.name + "\", " +
                        std::to_string(hp.n_params) + " parameters, " + hp.file_types + "; its cache " +
                        std::to_string(draft->num_blocks()) + " blocks, " + std::to_string(draft->cache_bytes()) +
                        " bytes; " + common + ")";
    draft_bytes_share_ = static_cast<double>(hp.bytes_per_step) / static_cast<double>(model_->hparams().bytes_per_step);
    proposer_ = std::move(draft);
  } else {
    info_.speculative = "off";
  }
}

void Engine::propose_drafts() {
  const SpeculativeOptions& spec = options_.speculative;
  const std::vector<Sequence*>& running = scheduler_->running();
  const int64_t n = static_cast<int64_t>(running.size());
  // Now and then, and until one has been timed, a step of as many sequences without proposals:
  // the pass that proposals are weighed against (pass_cost), which steps that always propose
  // would never time again.
  const bool plain_due = spec.adaptive && (steps_since_plain_pass_ >= kPlainPassEvery ||
                                           n >= static_cast<int64_t>(pass_seconds_by_rows_.size()) ||
                                           pass_seconds_by_rows_[n] <= 0);
  const bool on = proposer_ && n <= spec.max_batch;
  std::vector<ProposalRequest> requests;
  for (Sequence* s : running) {
    s->draft.clear();
    if (!on || s->num_uncomputed() != 1 || !s->request.sampling.speculative) continue;
    if (plain_due && is_greedy(s->request.sampling)) continue;
    if (s->draft_pause > 0) {
      --s->draft_pause;
      continue;
    }
    // The length that gains most at this sequence's acceptance rate and what proposing costs;
    // none pays: one token now, to see whether that changes, then a pause.
    int32_t k = spec.adaptive ? proposal_length(*s, n) : spec.num_tokens;
    if (k == 0) {
      s->draft_backoff = std::clamp(s->draft_backoff * 2, kFirstPause, kLongestPause);
      s->draft_pause = s->draft_backoff;
      k = 1;
    } else {
      s->draft_backoff = 0;
    }
    // Accepted tokens and the one sampled after them never pass the request's length.
    const int64_t room = std::min<int64_t>(s->request.sampling.max_new_tokens - s->num_generated(),
                                           s->max_tokens - static_cast<int64_t>(s->tokens.size()));
    k = static_cast<int32_t>(std::min<int64_t>(k, room - 1));
    if (k > 0) requests.push_back({s->id, s->tokens, k, &s->draft});
  }
  if (requests.empty()) return;
  try {
    proposer_->propose(requests);
  } catch (const std::exception& e) {
    // Proposals are only ever a guess: the step goes on without them.
    spdlog::error("speculative proposals failed: {}", e.what());
    for (Sequence* s : running) s->draft.clear();
  }
}

void Engine::verify(const ScheduledChunk& c, const float* logits) {
  const int64_t V = info_.n_vocab;
  Sequence& s = *c.seq;
  ++spec_drafts_total_;
  spec_draft_tokens_total_ += c.n_draft;
  int32_t accepted = 0;
  for (int32_t i = 0; i <= c.n_draft; ++i) {
    const int32_t draft = i < c.n_draft ? s.draft[i] : -1;  // read while s is alive
    int32_t token;
    const bool alive = emit(s, logits + i * V, draft, &token);
    const bool hit = draft >= 0 && token == draft;
    accepted += hit;
    if (!alive) {
      spec_accepted_tokens_total_ += accepted;
      return;  // the request ended (stop, length, error): s is gone
    }
    if (!hit) break;
    ++s.num_computed;  // the accepted token's K/V, computed in this pass, stand
  }
  spec_accepted_tokens_total_ += accepted;
  s.draft.clear();
  // Each proposed token is taken until one is refused: `accepted` successes, then one failure
  // unless all were taken.
  s.draft_hits = kFade * s.draft_hits + static_cast<float>(accepted);
  s.draft_misses = kFade * s.draft_misses + (accepted < c.n_draft ? 1.0f : 0.0f);
  // The rejected tokens' K/V lie past num_computed and are written over by what comes next.
  scheduler_->release_unused(&s);
  scheduler_->after_step(&s);
}

}  // namespace kvserve
