// Speculative decoding inside the step loop: proposals before scheduling, verification after the
// forward pass. The scheduler fits the proposed tokens into the step (scheduler.cc); the sampler
// accepts or replaces each one (Sampler::sample_against).
#include <algorithm>

#include <spdlog/spdlog.h>

#include "runtime/engine.h"
#include "speculative/draft_model.h"
#include "speculative/ngram_proposer.h"

namespace kvserve {
namespace {

// What one more verified row adds to a decode pass, as a share of it (kvserve-bench-speculative
// --part cost measures it; docs/performance.md has the figures).
constexpr double kVerifyRowCost = 0.06;
// Each verification's weight against the older ones in a sequence's acceptance counts.
constexpr float kFade = 0.9f;
// The acceptance rate a sequence starts from, and how many tokens' worth of evidence that is.
constexpr double kPriorRate = 0.7, kPriorWeight = 2.0;
// Steps without proposals when proposing does not pay; doubled while it goes on not paying.
constexpr int32_t kFirstPause = 8, kLongestPause = 64;

// Tokens per unit of time with k proposed tokens, against 1 without: each accepted with
// probability a (1 + a + ... + a^k tokens a pass) for a pass that costs 1 + k rows' worth of
// verification and k proposing passes of `draft_cost` each.
double gain(double a, int32_t k, double draft_cost) {
  double tokens = 0, p = 1;
  for (int32_t i = 0; i <= k; ++i, p *= a) tokens += p;
  return tokens / (1.0 + k * (kVerifyRowCost + draft_cost));
}

}  // namespace

int32_t Engine::proposal_length(const Sequence& s) const {
  const double a = (s.draft_hits + kPriorRate * kPriorWeight) / (s.draft_hits + s.draft_misses + kPriorWeight);
  const double draft_cost = decode_pass_seconds_ > 0 ? proposer_->pass_seconds() / decode_pass_seconds_ : 0.0;
  int32_t best = 0;
  double best_gain = 1.0;
  for (int32_t k = 1; k <= options_.speculative.num_tokens; ++k) {
    const double g = gain(a, k, draft_cost);
    if (g > best_gain) best = k, best_gain = g;
  }
  return best;
}

void Engine::note_decode_pass(const SchedulerOutput& plan, double seconds) {
  int64_t drafts = 0;
  for (const ScheduledChunk& c : plan.chunks) {
    if (c.n_tokens - c.n_draft != 1 || c.seq->num_computed + 1 != static_cast<int64_t>(c.seq->tokens.size())) return;
    drafts += c.n_draft;
  }
  const double one_row = seconds / (1.0 + kVerifyRowCost * static_cast<double>(drafts));
  decode_pass_seconds_ = decode_pass_seconds_ > 0 ? 0.9 * decode_pass_seconds_ + 0.1 * one_row : one_row;
}

void Engine::load_proposer(const ModelLoadOptions& load, int32_t kv_element_bytes, int64_t draft_cache_bytes) {
  const SpeculativeOptions& spec = options_.speculative;
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
    proposer_ = std::move(draft);
  } else {
    info_.speculative = "off";
  }
}

void Engine::propose_drafts() {
  const SpeculativeOptions& spec = options_.speculative;
  const std::vector<Sequence*>& running = scheduler_->running();
  const bool on = proposer_ && static_cast<int32_t>(running.size()) <= spec.max_batch;
  std::vector<ProposalRequest> requests;
  for (Sequence* s : running) {
    s->draft.clear();
    if (!on || s->num_uncomputed() != 1 || !s->request.sampling.speculative) continue;
    if (s->draft_pause > 0) {
      --s->draft_pause;
      continue;
    }
    // The length that gains most at this sequence's acceptance rate and what proposing costs;
    // none pays: one token now, to see whether that changes, then a pause.
    int32_t k = spec.adaptive ? proposal_length(*s) : spec.num_tokens;
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
