// Speculative decoding inside the step loop: proposals before scheduling, verification after the
// forward pass. The scheduler fits the proposed tokens into the step (scheduler.cc); the sampler
// accepts or replaces each one (Sampler::sample_against).
#include <algorithm>

#include "runtime/engine.h"
#include "speculative/ngram_proposer.h"

namespace kvserve {
namespace {

// Steps a sequence proposes nothing after a verification that accepted none of its tokens.
constexpr int32_t kPauseAfterMiss = 4;

}  // namespace

void Engine::propose_drafts() {
  const SpeculativeOptions& spec = options_.speculative;
  const std::vector<Sequence*>& running = scheduler_->running();
  const bool on = spec.method == "ngram" && static_cast<int32_t>(running.size()) <= spec.max_batch;
  const NgramProposerOptions ngram{spec.ngram_min, spec.ngram_max};
  for (Sequence* s : running) {
    s->draft.clear();
    if (!on || s->num_uncomputed() != 1 || !s->request.sampling.speculative) continue;
    if (s->draft_pause > 0) {
      --s->draft_pause;
      continue;
    }
    if (s->draft_limit == 0) s->draft_limit = spec.num_tokens;
    // Accepted tokens and the one sampled after them never pass the request's length.
    const int64_t room = std::min<int64_t>(s->request.sampling.max_new_tokens - s->num_generated(),
                                           s->max_tokens - static_cast<int64_t>(s->tokens.size()));
    const int32_t k = static_cast<int32_t>(std::min<int64_t>(s->draft_limit, room - 1));
    if (k > 0) propose_ngram(s->tokens, ngram, k, s->draft);
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
  // Longer proposals while they are taken whole; shorter ones and a pause while they miss.
  if (accepted == c.n_draft) {
    s.draft_limit = std::min(s.draft_limit + 1, options_.speculative.num_tokens);
  } else if (accepted == 0) {
    s.draft_limit = std::max(1, s.draft_limit / 2);
    s.draft_pause = kPauseAfterMiss;
  }
  // The rejected tokens' K/V lie past num_computed and are written over by what comes next.
  scheduler_->release_unused(&s);
  scheduler_->after_step(&s);
}

}  // namespace kvserve
