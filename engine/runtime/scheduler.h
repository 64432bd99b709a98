// Iteration-level scheduling (as in Orca and vLLM): every step, decide which sequences run and
// how many of their tokens, under a token budget, a sequence limit and the KV blocks free.
// Plain logic: no threads, no locks; the engine loop calls it once a step.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "runtime/config.h"
#include "kv_cache/block_allocator.h"
#include "kv_cache/kv_layout.h"
#include "runtime/sequence.h"

namespace kvserve {

struct ScheduledChunk {
  Sequence* seq;
  int32_t n_tokens;  // tokens of seq to run this step, starting at seq->num_computed (drafts included)
  bool samples;      // the chunk reaches the end of seq's tokens: sample the next one
  int32_t n_draft = 0;  // the last n_draft of n_tokens are seq->draft[0, n_draft), to verify
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> chunks;
  std::vector<Sequence*> preempted;  // sent back to waiting this step (blocks freed)
  int64_t n_tokens = 0;
};

class Scheduler {
 public:
  // max_model_len must already be resolved (non-zero). layout: the cache's layer groups, each
  // with a block table per sequence; a windowed group's blocks are released once no later
  // position can read them (default: one full group).
  Scheduler(const SchedulerOptions& options, BlockAllocator& allocator, int32_t block_size,
            bool prefix_caching = false, KvLayout layout = KvLayout::single(1));

  // Empty when a request of this size could ever run; otherwise the reason it never can.
  std::string check_fits(int64_t prompt_len, int64_t max_total) const;

  void add(Sequence* seq);  // joins the back of the waiting queue
  SchedulerOutput schedule();
  // Removes a sequence wherever it is (finished, cancelled) and frees its blocks.
  void remove(Sequence* seq);
  // After a step: registers the sequence's newly completed full blocks in the prefix cache,
  // then releases the blocks of its windowed groups that no later token can read.
  void after_step(Sequence* seq);
  void register_computed_blocks(Sequence* seq);  // the first half of after_step
  // Releases the blocks past the sequence's tokens (grown for proposed tokens it rejected).
  void release_unused(Sequence* seq);
  // The most blocks one sequence of max_total tokens holds at once, over every group.
  int64_t max_blocks_held(int64_t max_total) const;
  const KvLayout& layout() const { return layout_; }
  // A group's key for a block of the sequence's hash chain: group 0 uses the chain's own hashes,
  // the others theirs mixed with the group, so no two groups' blocks ever match.
  static uint64_t group_key(uint64_t hash, int32_t group);

  // Waiting interactive sequences (what max_waiting limits), and waiting background ones.
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::deque<Sequence*>& background_waiting() const { return background_; }
  const std::vector<Sequence*>& running() const { return running_; }
  int64_t preemptions_total() const { return preemptions_total_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Prompt tokens seen at first admission, and how many of them came from the prefix cache.
  int64_t prompt_tokens_admitted() const { return prompt_tokens_admitted_; }
  int64_t prompt_tokens_cached() const { return prompt_tokens_cached_; }

 private:
  static bool background(const Sequence* seq);
  // The tokens seq may take this step within budget: its own max_chunk at most.
  static int64_t chunk_cap(const Sequence* seq, int64_t budget);
  void preempt(Sequence* seq, SchedulerOutput& out, int64_t& budget);
  // n tokens of seq, the last n_draft of them its proposed ones.
  void append_chunk(Sequence* seq, int64_t n, SchedulerOutput& out, int64_t& budget, int64_t n_draft = 0);
  // Admits from `queue` while it fits, taking at most `cap` tokens (cap and budget shrink).
  void admit(std::deque<Sequence*>& queue, int64_t& cap, SchedulerOutput& out, int64_t& budget);
  Sequence* pick_victim(const Sequence* except) const;
  void attach_cached_prefix(Sequence* seq);
  void detach(Sequence* seq);
  bool grow(Sequence* seq, int64_t n_tokens);

  SchedulerOptions options_;
  BlockAllocator& alloc_;
  int32_t block_size_;
  std::deque<Sequence*> waiting_;     // interactive, first come first served
  std::deque<Sequence*> background_;  // background, first come first served, after waiting_
  std::vector<Sequence*> running_;  // in order of admission
  int64_t preemptions_total_ = 0;
  bool prefix_caching_;
  KvLayout layout_;
  int64_t prompt_tokens_admitted_ = 0;
  int64_t prompt_tokens_cached_ = 0;
};

}  // namespace kvserve
