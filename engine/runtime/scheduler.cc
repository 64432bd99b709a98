#include "runtime/scheduler.h"

#include <algorithm>

namespace kvserve {

Scheduler::Scheduler(const SchedulerOptions& options, BlockAllocator& allocator, int32_t block_size,
                     bool prefix_caching, int32_t window)
    : options_(options), alloc_(allocator), block_size_(block_size), prefix_caching_(prefix_caching), window_(window) {}

// Takes every full block of the sequence's known tokens that is already cached, in order, up
// to but not including the block holding the last token: that token is always computed so that
// there are logits to sample from.
void Scheduler::attach_cached_prefix(Sequence* seq) {
  const int64_t limit = static_cast<int64_t>(seq->tokens.size()) - 1;
  uint64_t parent = seq->prefix_root;
  for (int64_t i = 0; (i + 1) * block_size_ <= limit; ++i) {
    const int32_t* toks = seq->tokens.data() + i * block_size_;
    const uint64_t h = block_hash(parent, toks, block_size_);
    const int32_t b = alloc_.lookup(h, parent, toks, block_size_);
    if (b < 0) break;
    alloc_.retain(b);
    seq->table.append(b);
    seq->block_hashes.push_back(h);
    parent = h;
  }
  seq->num_computed = static_cast<int64_t>(seq->block_hashes.size()) * block_size_;
}

void Scheduler::detach(Sequence* seq) {
  seq->table.release_all(alloc_);
  seq->block_hashes.clear();
  seq->num_computed = 0;
}

void Scheduler::register_computed_blocks(Sequence* seq) {
  if (!prefix_caching_ || !seq->shares_cache) return;
  while (static_cast<int64_t>(seq->block_hashes.size() + 1) * block_size_ <= seq->num_computed) {
    const size_t i = seq->block_hashes.size();
    const uint64_t parent = i ? seq->block_hashes.back() : seq->prefix_root;
    const int32_t* toks = seq->tokens.data() + i * block_size_;
    const uint64_t h = block_hash(parent, toks, block_size_);
    alloc_.register_block(seq->table.blocks()[i], h, parent, toks, block_size_);
    seq->block_hashes.push_back(h);
  }
}

void Scheduler::after_step(Sequence* seq) {
  register_computed_blocks(seq);
  // The next token, at position num_computed, sees positions num_computed - window + 1 on.
  if (window_ > 0) seq->table.release_before(seq->num_computed + 1 - window_, alloc_);
}

int64_t Scheduler::max_blocks_held(int64_t max_total) const {
  const int64_t full = (max_total + block_size_ - 1) / block_size_;
  if (window_ == 0) return full;
  // A step's chunk (at most the token budget) plus the window behind its first token, each end
  // possibly in a partly used block.
  const int64_t span = int64_t{window_} - 1 + options_.max_num_batched_tokens;
  return std::min(full, (span + block_size_ - 1) / block_size_ + 1);
}

std::string Scheduler::check_fits(int64_t prompt_len, int64_t max_total) const {
  if (prompt_len > options_.max_model_len)
    return "prompt has " + std::to_string(prompt_len) + " tokens, more than max_model_len " +
           std::to_string(options_.max_model_len);
  if (max_total > options_.max_model_len)
    return "prompt (" + std::to_string(prompt_len) + " tokens) + max_new_tokens (" +
           std::to_string(max_total - prompt_len) + ") exceeds max_model_len " +
           std::to_string(options_.max_model_len);
  const int64_t blocks = max_blocks_held(max_total);
  if (blocks > alloc_.num_blocks())
    return "sampling.max_new_tokens: prompt + max_new_tokens (" + std::to_string(max_total) + " tokens) need " +
           std::to_string(blocks) + " KV blocks at full length, the whole cache has " + std::to_string(alloc_.num_blocks());
  return {};
}

bool Scheduler::background(const Sequence* seq) { return seq->request.priority == Priority::kBackground; }

int64_t Scheduler::chunk_cap(const Sequence* seq, int64_t budget) {
  return seq->max_chunk > 0 ? std::min<int64_t>(budget, seq->max_chunk) : budget;
}

void Scheduler::add(Sequence* seq) {
  seq->status = SeqStatus::kWaiting;
  (background(seq) ? background_ : waiting_).push_back(seq);
}

void Scheduler::remove(Sequence* seq) {
  seq->table.release_all(alloc_);
  seq->block_hashes.clear();
  auto r = std::find(running_.begin(), running_.end(), seq);
  if (r != running_.end()) running_.erase(r);
  std::deque<Sequence*>& queue = background(seq) ? background_ : waiting_;
  auto w = std::find(queue.begin(), queue.end(), seq);
  if (w != queue.end()) queue.erase(w);
  seq->status = SeqStatus::kFinished;
}

// Background sequences first; then the running sequence that loses the least work when its
// cache is dropped: the fewest computed tokens; among equals the most recently admitted.
Sequence* Scheduler::pick_victim(const Sequence* except) const {
  Sequence* best = nullptr;
  for (Sequence* s : running_) {
    if (s == except) continue;
    if (!best || (background(s) && !background(best)) ||
        (background(s) == background(best) && s->num_computed <= best->num_computed))
      best = s;
  }
  return best;
}

void Scheduler::preempt(Sequence* seq, SchedulerOutput& out, int64_t& budget) {
  auto c = std::find_if(out.chunks.begin(), out.chunks.end(), [&](const auto& ch) { return ch.seq == seq; });
  if (c != out.chunks.end()) {
    budget += c->n_tokens;
    out.n_tokens -= c->n_tokens;
    out.chunks.erase(c);
  }
  detach(seq);  // recompute: prompt and generated tokens run again on resume (cached blocks help)
  seq->status = SeqStatus::kWaiting;
  ++seq->preemptions;
  ++preemptions_total_;
  running_.erase(std::find(running_.begin(), running_.end(), seq));
  (background(seq) ? background_ : waiting_).push_front(seq);
  out.preempted.push_back(seq);
}

void Scheduler::append_chunk(Sequence* seq, int64_t n, SchedulerOutput& out, int64_t& budget) {
  seq->table.grow_to(seq->num_computed + n, alloc_);
  out.chunks.push_back({seq, static_cast<int32_t>(n), seq->num_computed + n == static_cast<int64_t>(seq->tokens.size())});
  out.n_tokens += n;
  budget -= n;
}

// The waiting queue's head while it fits, first come first served. The head is never skipped:
// if it does not fit now, nobody behind it overtakes it (no starvation). Nothing is admitted in
// a step that had to preempt, or the victim would be evicted again at once.
void Scheduler::admit(std::deque<Sequence*>& queue, int64_t& cap, SchedulerOutput& out, int64_t& budget) {
  while (out.preempted.empty() && !queue.empty() && cap > 0 && budget > 0 &&
         static_cast<int32_t>(running_.size()) < options_.max_num_seqs) {
    Sequence* seq = queue.front();
    // Cached prefix blocks cost neither compute budget nor new blocks.
    if (prefix_caching_ && seq->shares_cache && seq->table.blocks().empty()) attach_cached_prefix(seq);
    const int64_t n = std::min({seq->num_uncomputed(), chunk_cap(seq, budget), cap});
    if (seq->table.blocks_needed(seq->num_computed + n) > alloc_.num_free()) {
      detach(seq);
      break;
    }
    if (seq->preemptions == 0) {
      seq->cached_prompt_tokens = static_cast<int32_t>(std::min<int64_t>(seq->num_computed, seq->num_prompt));
      prompt_tokens_admitted_ += seq->num_prompt;
      prompt_tokens_cached_ += seq->cached_prompt_tokens;
    }
    queue.pop_front();
    seq->status = SeqStatus::kRunning;
    running_.push_back(seq);
    append_chunk(seq, n, out, budget);
    cap -= n;
  }
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int64_t budget = options_.max_num_batched_tokens;

  // Running interactive sequences first: their decodes (one token each), then their prompt
  // chunks, so a long prompt never holds back another sequence's next token.
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<Sequence*> snapshot = running_;
    for (Sequence* seq : snapshot) {
      if (seq->status != SeqStatus::kRunning || background(seq)) continue;  // preempted earlier in this step
      const int64_t need = seq->num_uncomputed();
      if (need <= 0 || (pass == 0) != (need == 1)) continue;
      const int64_t n = std::min(need, chunk_cap(seq, budget));
      if (n <= 0) continue;
      bool self_preempted = false;
      while (seq->table.blocks_needed(seq->num_computed + n) > alloc_.num_free()) {
        Sequence* victim = pick_victim(seq);
        if (!victim) {
          preempt(seq, out, budget);
          self_preempted = true;
          break;
        }
        preempt(victim, out, budget);
      }
      if (!self_preempted) append_chunk(seq, n, out, budget);
    }
  }
  int64_t no_cap = budget;
  admit(waiting_, no_cap, out, budget);

  // Background work only in steps that process no interactive prompt, so it never delays a
  // first token by more than the short step it rides in; and only up to its own cap.
  for (const ScheduledChunk& c : out.chunks)
    if (!background(c.seq) && c.seq->num_computed < c.seq->num_prompt) return out;
  const int32_t per_step = options_.background_tokens_per_step;
  int64_t cap = per_step > 0 ? std::min<int64_t>(budget, per_step) : budget;
  const std::vector<Sequence*> snapshot = running_;
  for (Sequence* seq : snapshot) {
    if (seq->status != SeqStatus::kRunning || !background(seq)) continue;
    const int64_t n = std::min(seq->num_uncomputed(), chunk_cap(seq, cap));
    if (n <= 0) continue;
    // Background work never evicts anyone: short of blocks, it steps aside itself.
    if (seq->table.blocks_needed(seq->num_computed + n) > alloc_.num_free()) {
      preempt(seq, out, budget);
      continue;
    }
    append_chunk(seq, n, out, budget);
    cap -= n;
  }
  admit(background_, cap, out, budget);
  return out;
}

}  // namespace kvserve
