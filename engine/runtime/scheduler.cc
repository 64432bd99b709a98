#include "runtime/scheduler.h"

#include <algorithm>
#include <utility>

namespace kvserve {

Scheduler::Scheduler(const SchedulerOptions& options, BlockAllocator& allocator, int32_t block_size,
                     bool prefix_caching, KvLayout layout)
    : options_(options), alloc_(allocator), block_size_(block_size), prefix_caching_(prefix_caching),
      layout_(std::move(layout)) {}

uint64_t Scheduler::group_key(uint64_t hash, int32_t group) {
  return group == 0 ? hash : hash ^ (0x9e3779b97f4a7c15ull * static_cast<uint64_t>(group));
}

// Takes the longest run of the sequence's full blocks that the cache can resume from, up to but
// not including the block holding the last token (always computed, so that there are logits
// to sample from). A full group needs every block of the run; a windowed group only those its
// window still sees from the run's end, the older entries standing as released: a shared
// prompt's early windowed blocks, released and evicted first, do not spoil its reuse.
void Scheduler::attach_cached_prefix(Sequence* seq) {
  const int64_t limit = static_cast<int64_t>(seq->tokens.size()) - 1;
  const int32_t groups = layout_.n_groups();
  std::vector<uint64_t> hashes, parents;
  for (uint64_t parent = seq->prefix_root; static_cast<int64_t>(hashes.size() + 1) * block_size_ <= limit;) {
    parents.push_back(parent);
    parent = block_hash(parent, seq->tokens.data() + hashes.size() * block_size_, block_size_);
    hashes.push_back(parent);
  }
  const int64_t n = static_cast<int64_t>(hashes.size());
  std::vector<std::vector<int32_t>> found(groups, std::vector<int32_t>(n, -1));
  int64_t run = n;  // the full groups' common run of cached blocks
  for (int32_t g = 0; g < groups; ++g) {
    const bool full = layout_.group_window[g] == 0;
    for (int64_t i = 0; i < (full ? run : n); ++i) {
      const int32_t* toks = seq->tokens.data() + i * block_size_;
      found[g][i] = alloc_.lookup(group_key(hashes[i], g), group_key(parents[i], g), toks, block_size_);
      if (full && found[g][i] < 0) run = i;
    }
  }
  // The first block group g needs to resume after k blocks: the window of position k·bs.
  const auto first_needed = [&](int32_t g, int64_t k) -> int64_t {
    const int32_t w = layout_.group_window[g];
    return w == 0 ? 0 : std::max<int64_t>(0, (k * block_size_ + 1 - w) / block_size_);
  };
  int64_t k = run;
  for (; k > 0; --k) {
    bool ok = true;
    for (int32_t g = 0; g < groups && ok; ++g)
      for (int64_t i = first_needed(g, k); i < k && ok; ++i) ok = found[g][i] >= 0;
    if (ok) break;
  }
  for (int32_t g = 0; g < groups; ++g)
    for (int64_t i = 0; i < k; ++i) {
      if (i < first_needed(g, k)) {
        seq->tables[g].append_released();
      } else {
        alloc_.retain(found[g][i]);
        seq->tables[g].append(found[g][i]);
      }
    }
  seq->block_hashes.assign(hashes.begin(), hashes.begin() + k);
  seq->num_computed = k * block_size_;
}

void Scheduler::detach(Sequence* seq) {
  for (BlockTable& t : seq->tables) t.release_all(alloc_);
  seq->block_hashes.clear();
  seq->num_computed = 0;
}

bool Scheduler::grow(Sequence* seq, int64_t n_tokens) {
  if (seq->blocks_needed(n_tokens) > alloc_.num_free()) return false;
  for (BlockTable& t : seq->tables) t.grow_to(n_tokens, alloc_);
  return true;
}

void Scheduler::register_computed_blocks(Sequence* seq) {
  if (!prefix_caching_ || !seq->shares_cache) return;
  while (static_cast<int64_t>(seq->block_hashes.size() + 1) * block_size_ <= seq->num_computed) {
    const size_t i = seq->block_hashes.size();
    const uint64_t parent = i ? seq->block_hashes.back() : seq->prefix_root;
    const int32_t* toks = seq->tokens.data() + i * block_size_;
    const uint64_t h = block_hash(parent, toks, block_size_);
    for (int32_t g = 0; g < layout_.n_groups(); ++g)
      if (const int32_t b = seq->tables[g].blocks()[i]; b != BlockTable::kReleased)
        alloc_.register_block(b, group_key(h, g), group_key(parent, g), toks, block_size_, g == 0);
    seq->block_hashes.push_back(h);
  }
}

void Scheduler::release_unused(Sequence* seq) {
  for (BlockTable& t : seq->tables) t.truncate(static_cast<int64_t>(seq->tokens.size()), alloc_);
}

void Scheduler::after_step(Sequence* seq) {
  register_computed_blocks(seq);
  // The next token, at position num_computed, sees positions num_computed - window + 1 on.
  for (int32_t g = 0; g < layout_.n_groups(); ++g)
    if (const int32_t w = layout_.group_window[g]; w > 0)
      seq->tables[g].release_before(seq->num_computed + 1 - w, alloc_);
}

int64_t Scheduler::max_blocks_held(int64_t max_total) const {
  // A step adds at most the token budget's positions.
  return layout_.blocks_held(max_total, block_size_, options_.max_num_batched_tokens);
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
  for (BlockTable& t : seq->tables) t.release_all(alloc_);
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

void Scheduler::append_chunk(Sequence* seq, int64_t n, SchedulerOutput& out, int64_t& budget, int64_t n_draft) {
  grow(seq, seq->num_computed + n);
  out.chunks.push_back({seq, static_cast<int32_t>(n),
                        seq->num_computed + n - n_draft == static_cast<int64_t>(seq->tokens.size()),
                        static_cast<int32_t>(n_draft)});
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
    if (prefix_caching_ && seq->shares_cache && seq->tables[0].blocks().empty()) attach_cached_prefix(seq);
    const int64_t n = std::min({seq->num_uncomputed(), chunk_cap(seq, budget), cap});
    if (seq->blocks_needed(seq->num_computed + n) > alloc_.num_free()) {
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

  // Running interactive sequences first: their decodes (one token each, and any proposed
  // tokens to verify), then their prompt chunks, so a long prompt never holds back another
  // sequence's next token.
  int64_t decodes_left = 0, decode_blocks_left = 0;
  for (const Sequence* seq : running_)
    if (!background(seq) && seq->num_uncomputed() == 1) {
      ++decodes_left;
      decode_blocks_left += seq->blocks_needed(seq->num_computed + 1);
    }
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<Sequence*> snapshot = running_;
    for (Sequence* seq : snapshot) {
      if (seq->status != SeqStatus::kRunning || background(seq)) continue;  // preempted earlier in this step
      const int64_t need = seq->num_uncomputed();
      if (need <= 0 || (pass == 0) != (need == 1)) continue;
      int64_t n = std::min(need, chunk_cap(seq, budget));
      if (n <= 0) continue;
      // A decode's proposed tokens ride along within the budget and the free blocks, never at
      // the cost of another sequence's place (a draft that does not fit is shortened or dropped).
      // The decodes after this one keep their token and the blocks it needs.
      int64_t n_draft = 0;
      if (pass == 0) {
        --decodes_left;
        decode_blocks_left -= seq->blocks_needed(seq->num_computed + 1);
      }
      if (pass == 0 && !seq->draft.empty()) {
        n_draft = std::min<int64_t>(static_cast<int64_t>(seq->draft.size()), budget - n - decodes_left);
        while (n_draft > 0 && seq->blocks_needed(seq->num_computed + n + n_draft) + decode_blocks_left > alloc_.num_free())
          --n_draft;
        n_draft = std::max<int64_t>(n_draft, 0);
        seq->draft.resize(n_draft);
      }
      bool self_preempted = false;
      while (seq->blocks_needed(seq->num_computed + n) > alloc_.num_free()) {
        Sequence* victim = pick_victim(seq);
        if (!victim) {
          preempt(seq, out, budget);
          self_preempted = true;
          break;
        }
        preempt(victim, out, budget);
      }
      if (self_preempted) continue;
      append_chunk(seq, n + n_draft, out, budget, n_draft);
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
    if (seq->blocks_needed(seq->num_computed + n) > alloc_.num_free()) {
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
