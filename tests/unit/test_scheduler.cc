// Scheduler scenarios with no model: token budget, chunked prefill, decode-first ordering,
// FCFS admission, refusal of impossible requests, preemption, no starvation, and background
// (inspection) work that never delays interactive prompts and is evicted first.
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "runtime/scheduler.h"

namespace kvserve {
namespace {

class SchedulerTest : public ::testing::Test {
 protected:
  // window: every layer's (0: none); or layer_windows, one per layer, for a mixed model.
  void make(int32_t blocks, int32_t block_size, SchedulerOptions o, int32_t window = 0,
            std::vector<int32_t> layer_windows = {}, bool prefix_caching = false) {
    block_size_ = block_size;
    alloc_ = std::make_unique<BlockAllocator>(blocks);
    if (layer_windows.empty()) layer_windows = {window};
    layout_ = KvLayout::plan(layer_windows, o.max_model_len);
    sched_ = std::make_unique<Scheduler>(o, *alloc_, block_size, prefix_caching, layout_);
  }
  Sequence* add(int prompt_len, int max_new, Priority priority = Priority::kInteractive) {
    Request r;
    r.prompt.assign(prompt_len, 7);
    r.sampling.max_new_tokens = max_new;
    r.priority = priority;
    seqs_.push_back(std::make_unique<Sequence>(seqs_.size() + 1, r, block_size_, layout_.n_groups()));
    seqs_.back()->max_tokens = prompt_len + max_new;
    sched_->add(seqs_.back().get());
    return seqs_.back().get();
  }
  // Applies a plan the way the engine would: computed tokens advance, sampled tokens append,
  // sequences at their length limit finish. Returns the finished ones.
  std::vector<Sequence*> run(const SchedulerOutput& out) {
    std::vector<Sequence*> done;
    for (const auto& c : out.chunks) {
      c.seq->num_computed += c.n_tokens;
      EXPECT_LE(c.seq->num_computed, static_cast<int64_t>(c.seq->tokens.size()));
      for (const BlockTable& t : c.seq->tables)
        EXPECT_GE(static_cast<int64_t>(t.blocks().size()) * block_size_, c.seq->num_computed);
      sched_->after_step(c.seq);
      if (c.samples) {
        c.seq->tokens.push_back(1);
        if (static_cast<int32_t>(c.seq->tokens.size()) >= c.seq->max_tokens) done.push_back(c.seq);
      }
    }
    for (Sequence* s : done) sched_->remove(s);
    EXPECT_TRUE(alloc_->consistent());
    return done;
  }

  int32_t block_size_ = 16;
  KvLayout layout_ = KvLayout::single(1);
  std::unique_ptr<BlockAllocator> alloc_;
  std::unique_ptr<Scheduler> sched_;
  std::vector<std::unique_ptr<Sequence>> seqs_;
};

// A scored prompt (max_chunk set) takes at most max_chunk tokens a step, on admission and after;
// the budget it leaves goes to others.
TEST_F(SchedulerTest, ScoredPromptChunksStayWithinTheirCap) {
  make(256, 16, {.max_num_seqs = 8, .max_num_batched_tokens = 64, .max_model_len = 2048});
  Sequence* scored = add(100, 2);
  scored->max_chunk = 24;
  Sequence* other = add(30, 2);
  std::vector<int32_t> scored_chunks;
  for (int step = 0; step < 12 && scored->num_computed < scored->num_prompt; ++step) {
    const SchedulerOutput out = sched_->schedule();
    for (const auto& c : out.chunks) {
      if (c.seq == scored) scored_chunks.push_back(c.n_tokens);
      if (c.seq == other && step == 0) {
        EXPECT_EQ(c.n_tokens, 30);  // admitted beside it in the first step
      }
    }
    run(out);
  }
  EXPECT_EQ(scored_chunks, (std::vector<int32_t>{24, 24, 24, 24, 4}));
}

// Every layer windowed (24 positions): a sequence holds only the blocks its next token can see,
// so three requests of 400 tokens run at once in a cache of 24 blocks of 8 (192 tokens), and
// check_fits counts a request by what it holds, not by its length.
TEST_F(SchedulerTest, SlidingWindowReleasesBlocksBehindIt) {
  make(24, 8, {.max_num_seqs = 4, .max_num_batched_tokens = 16, .max_model_len = 512}, 24);
  EXPECT_EQ(sched_->max_blocks_held(400), (24 - 1 + 16 + 7) / 8 + 1);
  EXPECT_EQ(sched_->check_fits(40, 400), "");
  std::vector<Sequence*> seqs = {add(40, 360), add(40, 360), add(40, 360)};
  int32_t most_held = 0;
  for (int step = 0; step < 2000 && !seqs.empty(); ++step) {
    const SchedulerOutput out = sched_->schedule();
    EXPECT_TRUE(out.preempted.empty()) << "step " << step;
    for (const auto& c : out.chunks) {
      // Every position the chunk's first token sees is still held; everything before is released.
      const int64_t first_seen = std::max<int64_t>(0, c.seq->num_computed - 24 + 1);
      for (int64_t b = 0; b < static_cast<int64_t>(c.seq->tables[0].blocks().size()); ++b) {
        const bool needed = (b + 1) * 8 > first_seen;
        EXPECT_EQ(c.seq->tables[0].blocks()[b] != BlockTable::kReleased, needed) << "block " << b;
      }
    }
    for (Sequence* s : run(out)) seqs.erase(std::find(seqs.begin(), seqs.end(), s));
    for (Sequence* s : seqs) most_held = std::max(most_held, s->tables[0].held());
  }
  EXPECT_TRUE(seqs.empty()) << "not all finished";
  EXPECT_LE(most_held, sched_->max_blocks_held(400));
  EXPECT_EQ(alloc_->num_free(), 24);
}

TEST_F(SchedulerTest, LongPromptIsChunkedAndDecodesKeepFlowing) {
  make(256, 16, {.max_num_seqs = 8, .max_num_batched_tokens = 32, .max_model_len = 2048});
  Sequence* a = add(4, 50);
  run(sched_->schedule());  // a's prompt
  Sequence* big = add(200, 4);
  int steps_with_big_prefill = 0;
  while (big->num_computed < big->num_prompt) {
    auto out = sched_->schedule();
    EXPECT_LE(out.n_tokens, 32);
    bool a_decoded = false;
    for (const auto& c : out.chunks) {
      if (c.seq == a) a_decoded = c.n_tokens == 1;
      if (c.seq == big) ++steps_with_big_prefill;
    }
    EXPECT_TRUE(a_decoded) << "the decode of a running sequence was stalled by a long prompt";
    run(out);
  }
  // 200 prompt tokens at 31 per step (one token of budget goes to a's decode).
  EXPECT_EQ(steps_with_big_prefill, 7);
}

// Speculative decoding: a decode's proposed tokens ride in its chunk, counted against the token
// budget, and shrink (never preempting anyone) so that every other decode of the step keeps its
// token and a block; after verification the blocks past the kept tokens go back.
TEST_F(SchedulerTest, ProposedTokensRideWithinBudgetAndBlocksAndNeverDisplaceADecode) {
  make(64, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 8, .max_model_len = 256});
  Sequence* a = add(2, 40);
  Sequence* b = add(2, 40);
  Sequence* c = add(2, 40);
  run(sched_->schedule());  // the three prompts; each samples its first token
  for (Sequence* s : {a, b, c}) ASSERT_EQ(s->num_uncomputed(), 1);

  a->draft = {5, 6, 7, 8, 9, 10};
  auto out = sched_->schedule();
  ASSERT_EQ(out.chunks.size(), 3u);
  EXPECT_EQ(out.n_tokens, 8);  // 6 proposed, cut to 5 to leave b and c their decode
  for (const auto& ch : out.chunks) {
    EXPECT_TRUE(ch.samples);
    EXPECT_EQ(ch.n_tokens, ch.seq == a ? 6 : 1);
    EXPECT_EQ(ch.n_draft, ch.seq == a ? 5 : 0);
  }
  EXPECT_EQ(a->draft.size(), 5u);
  EXPECT_EQ(a->tables[0].blocks().size(), 2u);  // positions 2..7
  // The engine accepts none of a's proposals and samples one token per sequence.
  for (const auto& ch : out.chunks) {
    ch.seq->num_computed += ch.n_tokens - ch.n_draft;
    ch.seq->tokens.push_back(1);
  }
  a->draft.clear();
  sched_->release_unused(a);
  EXPECT_EQ(a->tables[0].blocks().size(), 1u);  // 4 tokens: one block of 4
  EXPECT_TRUE(alloc_->consistent());

  // Short of blocks: b and c each need a block for position 4; a's proposals get what is left.
  for (const auto& ch : out.chunks) {
    ch.seq->num_computed += 1;
    ch.seq->tokens.push_back(1);
  }
  std::vector<int32_t> hog;
  while (alloc_->num_free() > 3) hog.push_back(alloc_->allocate());
  a->draft = {5, 6, 7, 8, 9, 10};
  out = sched_->schedule();
  EXPECT_TRUE(out.preempted.empty());
  ASSERT_EQ(out.chunks.size(), 3u);
  // a computes position 4 and may propose up to position 7 (one block), not 9 (budget 5).
  for (const auto& ch : out.chunks) EXPECT_EQ(ch.n_draft, ch.seq == a ? 3 : 0) << ch.seq->id;
  EXPECT_EQ(alloc_->num_free(), 0);
  for (int32_t blk : hog) alloc_->release(blk);
}

TEST_F(SchedulerTest, BudgetAndSequenceLimitEveryStep) {
  make(1024, 8, {.max_num_seqs = 5, .max_num_batched_tokens = 40, .max_model_len = 512});
  std::mt19937 rng(1);
  int finished = 0;
  for (int step = 0; step < 400; ++step) {
    if (step % 3 == 0 && seqs_.size() < 60) add(1 + rng() % 90, 1 + rng() % 30);
    auto out = sched_->schedule();
    int64_t sum = 0;
    for (const auto& c : out.chunks) sum += c.n_tokens;
    EXPECT_EQ(sum, out.n_tokens);
    EXPECT_LE(out.n_tokens, 40);
    EXPECT_LE(sched_->running().size(), 5u);
    finished += static_cast<int>(run(out).size());
  }
  EXPECT_EQ(finished, 60);
  EXPECT_EQ(alloc_->num_free(), 1024);
}

TEST_F(SchedulerTest, AdmitsFirstComeFirstServed) {
  make(256, 16, {.max_num_seqs = 2, .max_num_batched_tokens = 64, .max_model_len = 512});
  Sequence* a = add(10, 2);
  Sequence* b = add(10, 2);
  Sequence* c = add(10, 2);
  auto out = sched_->schedule();
  ASSERT_EQ(out.chunks.size(), 2u);
  EXPECT_EQ(out.chunks[0].seq, a);
  EXPECT_EQ(out.chunks[1].seq, b);
  EXPECT_EQ(sched_->waiting().front(), c);
}

TEST_F(SchedulerTest, RefusesWhatCanNeverFit) {
  make(20, 16, {.max_num_seqs = 4, .max_num_batched_tokens = 64, .max_model_len = 256});
  EXPECT_EQ(sched_->check_fits(100, 200), "");
  EXPECT_NE(sched_->check_fits(300, 301).find("max_model_len"), std::string::npos);
  EXPECT_NE(sched_->check_fits(200, 257).find("exceeds max_model_len"), std::string::npos);
  make(10, 16, {.max_num_seqs = 4, .max_num_batched_tokens = 64, .max_model_len = 1000});
  EXPECT_NE(sched_->check_fits(100, 161).find("KV blocks"), std::string::npos);  // 11 blocks > 10
  EXPECT_EQ(sched_->check_fits(100, 160), "");
}

TEST_F(SchedulerTest, PreemptsTheSequenceThatLosesLeastWork) {
  // 6 blocks of 4 tokens; two sequences that both want to grow to 12 tokens (3 blocks) fit,
  // a third squeezes them.
  make(6, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 64, .max_model_len = 64});
  Sequence* a = add(7, 5);
  run(sched_->schedule());
  Sequence* b = add(3, 9);
  Sequence* c = add(3, 9);
  bool preempted = false;
  for (int step = 0; step < 100 && !(a->status == SeqStatus::kFinished && b->status == SeqStatus::kFinished &&
                                     c->status == SeqStatus::kFinished);
       ++step) {
    auto out = sched_->schedule();
    for (Sequence* p : out.preempted) {
      preempted = true;
      EXPECT_NE(p, a) << "the oldest, longest sequence was chosen as victim";
      EXPECT_EQ(p->num_computed, 0);
      EXPECT_TRUE(p->tables[0].blocks().empty());
    }
    run(out);
  }
  EXPECT_TRUE(preempted);
  EXPECT_GT(sched_->preemptions_total(), 0);
  EXPECT_EQ(a->status, SeqStatus::kFinished);
  EXPECT_EQ(b->status, SeqStatus::kFinished);
  EXPECT_EQ(c->status, SeqStatus::kFinished);
  EXPECT_EQ(alloc_->num_free(), 6);
}

TEST_F(SchedulerTest, NoStarvationUnderSteadyArrivals) {
  // A big request arrives behind a stream of small ones and keeps arriving ones behind it.
  make(64, 16, {.max_num_seqs = 4, .max_num_batched_tokens = 64, .max_model_len = 1024});
  for (int i = 0; i < 4; ++i) add(20, 20);
  run(sched_->schedule());
  Sequence* big = add(600, 10);  // needs 38 of 64 blocks: only fits when most others are gone
  int admitted_at = -1;
  for (int step = 0; step < 2000; ++step) {
    if (step % 2 == 0) add(20, 20);  // steady arrivals that would fit right away
    run(sched_->schedule());
    if (admitted_at < 0 && big->status != SeqStatus::kWaiting) admitted_at = step;
    if (big->status == SeqStatus::kFinished) break;
  }
  ASSERT_GE(admitted_at, 0) << "the big request was never admitted";
  // Bounded: the four running ahead of it finish within their 20 tokens.
  EXPECT_LE(admitted_at, 25);
  EXPECT_EQ(big->status, SeqStatus::kFinished);
}

int64_t background_tokens(const SchedulerOutput& out) {
  int64_t n = 0;
  for (const auto& c : out.chunks) n += c.seq->request.priority == Priority::kBackground ? c.n_tokens : 0;
  return n;
}

TEST_F(SchedulerTest, BackgroundTakesLeftoversWithinItsCapAndNeverBesideAnInteractivePrompt) {
  make(512, 16, {.max_num_seqs = 16, .max_num_batched_tokens = 256, .max_model_len = 512,
                 .background_tokens_per_step = 16});
  std::vector<Sequence*> background;
  for (int i = 0; i < 12; ++i) background.push_back(add(64, 1, Priority::kBackground));
  Sequence* streaming = add(8, 30);
  int steps = 0, steps_with_interactive_prompt = 0;
  Sequence* late = nullptr;
  while (steps < 400) {
    if (steps == 10) late = add(100, 5);  // arrives while background work is under way
    SchedulerOutput out = sched_->schedule();
    EXPECT_LE(background_tokens(out), 16) << "step " << steps;
    bool interactive_prompt = false;
    for (const auto& c : out.chunks)
      interactive_prompt |= c.seq->request.priority == Priority::kInteractive && c.seq->num_computed < c.seq->num_prompt;
    if (interactive_prompt) {
      ++steps_with_interactive_prompt;
      EXPECT_EQ(background_tokens(out), 0) << "background work rode along with an interactive prompt at step " << steps;
    }
    if (steps == 10) {
      // The late prompt is admitted at once, ahead of the eleven background sequences waiting.
      ASSERT_EQ(late->status, SeqStatus::kRunning);
      EXPECT_FALSE(sched_->background_waiting().empty());
    }
    run(out);
    ++steps;
    bool all_done = streaming->status == SeqStatus::kFinished && late && late->status == SeqStatus::kFinished;
    for (Sequence* b : background) all_done &= b->status == SeqStatus::kFinished;
    if (all_done) break;
  }
  EXPECT_EQ(steps_with_interactive_prompt, 2);  // the first prompt's step and the late one's
  for (Sequence* b : background) EXPECT_EQ(b->status, SeqStatus::kFinished);
  // 12 x 64 background tokens at 16 per step, beside a stream decoding throughout.
  EXPECT_GE(steps, 12 * 64 / 16);
  EXPECT_LE(steps, 12 * 64 / 16 + 4);
  EXPECT_EQ(alloc_->num_free(), 512);
}

TEST_F(SchedulerTest, BackgroundIsEvictedFirstAndNeverEvictsOthers) {
  // 10 blocks of 4 tokens. A background sequence (31 tokens at the end: 8 blocks) has 5 blocks
  // when two interactive ones arrive (12 and 28 tokens: 3 and 7 blocks). When they grow, the
  // background one is evicted, although the short interactive one has computed far less (the
  // victim the rule for equals would pick).
  make(10, 4, {.max_num_seqs = 4, .max_num_batched_tokens = 64, .max_model_len = 64,
               .background_tokens_per_step = 4});
  Sequence* bg = add(30, 1, Priority::kBackground);
  for (int step = 0; step < 5; ++step) run(sched_->schedule());
  ASSERT_EQ(bg->num_computed, 20);
  Sequence* small = add(4, 8);
  Sequence* fg = add(8, 20);
  bool evicted = false;
  for (int step = 0; step < 60 && fg->status != SeqStatus::kFinished; ++step) {
    SchedulerOutput out = sched_->schedule();
    for (Sequence* p : out.preempted) {
      EXPECT_EQ(p, bg) << "an interactive sequence was evicted while a background one held blocks";
      evicted |= p == bg;
    }
    run(out);
  }
  EXPECT_TRUE(evicted);
  EXPECT_EQ(small->status, SeqStatus::kFinished);
  EXPECT_EQ(fg->status, SeqStatus::kFinished);
  EXPECT_EQ(small->preemptions + fg->preemptions, 0);
  for (int step = 0; step < 60 && bg->status != SeqStatus::kFinished; ++step) run(sched_->schedule());
  EXPECT_EQ(bg->status, SeqStatus::kFinished);
  EXPECT_EQ(alloc_->num_free(), 10);
}

// Gemma 3's shape: five layers windowed (16 positions), one full, in six groups of one layer.
// Each windowed group keeps only the blocks its next token can see while the full group keeps
// every block, so a 300-token sequence holds 6 blocks per windowed group and all 38 of the full
// one (not 6 x 38); a second sequence with the same 64-token prefix takes the cached blocks of
// every group (the windowed groups only those their window sees from there).
TEST_F(SchedulerTest, WindowedGroupsReleaseTheirBlocksWhileTheFullGroupKeepsItsOwn) {
  const SchedulerOptions o{.max_num_seqs = 4, .max_num_batched_tokens = 16, .max_model_len = 512};
  make(200, 8, o, 0, {16, 16, 16, 16, 16, 0}, /*prefix_caching=*/true);
  ASSERT_EQ(layout_.n_groups(), 6);
  ASSERT_EQ(layout_.layers_per_group, 1);
  const int64_t windowed = (16 - 1 + 16 + 7) / 8 + 1;  // window behind a chunk, the chunk, partial ends
  EXPECT_EQ(sched_->max_blocks_held(300), 5 * windowed + (300 + 7) / 8);
  // Without the release it would need 6 x 38 = 228 blocks: more than the cache.
  EXPECT_EQ(sched_->check_fits(40, 300), "");
  Sequence* a = add(80, 220);
  int32_t most_held = 0;
  while (std::find_if(seqs_.begin(), seqs_.end(), [&](const auto& p) { return p.get() == a; }) != seqs_.end() &&
         a->status != SeqStatus::kFinished) {
    const SchedulerOutput out = sched_->schedule();
    ASSERT_FALSE(out.chunks.empty());
    for (const auto& c : out.chunks) {
      const int64_t first_seen = std::max<int64_t>(0, c.seq->num_computed - 16 + 1);
      for (int32_t g = 0; g < 6; ++g)
        for (int64_t b = 0; b < static_cast<int64_t>(c.seq->tables[g].blocks().size()); ++b) {
          const bool held = c.seq->tables[g].blocks()[b] != BlockTable::kReleased;
          EXPECT_EQ(held, g == 5 || (b + 1) * 8 > first_seen) << "group " << g << " block " << b;
        }
    }
    most_held = std::max(most_held, a->blocks_held());
    if (!run(out).empty()) break;
  }
  EXPECT_LE(most_held, sched_->max_blocks_held(300));
  EXPECT_GT(most_held, 38);
  EXPECT_EQ(alloc_->num_used(), 0);

  // Prefix caching across groups: b's first 64 tokens (8 blocks) come from a's cached blocks in
  // every group: the windowed groups' too, released blocks waiting on the LRU list.
  Sequence* b = add(80, 4);
  sched_->schedule();
  EXPECT_EQ(b->cached_prompt_tokens, 72);
  for (int32_t g = 0; g < 6; ++g) EXPECT_GE(b->tables[g].blocks().size(), 9u) << "group " << g;
  // Removing it gives back every group's blocks.
  sched_->remove(b);
  EXPECT_TRUE(alloc_->consistent());
  EXPECT_EQ(alloc_->num_used(), 0);
}

// The allocator's events, once recording: a registered block is stored (with its parent and
// tokens), an evicted one removed; a block registered unannounced (a later layer group) is
// neither; a block whose hash is already cached is not stored twice.
TEST(BlockAllocatorEvents, StoredOnRegisterRemovedOnEviction) {
  BlockAllocator a(2);
  a.record_events();
  const int32_t toks[4] = {1, 2, 3, 4};
  const int32_t b0 = a.allocate(), b1 = a.allocate();
  a.register_block(b0, 11, 0, toks, 4);
  a.register_block(b1, 12, 11, toks, 4, /*announce=*/false);
  a.register_block(b1, 11, 0, toks, 4);  // hash 11 is cached already
  std::vector<CacheEvent> e = a.take_events();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind, CacheEvent::Kind::kStored);
  EXPECT_EQ(e[0].hash, 11u);
  EXPECT_EQ(e[0].parent, 0u);
  EXPECT_EQ(e[0].tokens, std::vector<int32_t>(toks, toks + 4));
  a.release(b0);
  a.release(b1);
  EXPECT_TRUE(a.take_events().empty());  // kept cached, not removed
  a.allocate();                           // evicts the least recently used: b0 (hash 11)
  a.allocate();                           // evicts b1, which was never announced
  e = a.take_events();
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].kind, CacheEvent::Kind::kRemoved);
  EXPECT_EQ(e[0].hash, 11u);
  EXPECT_TRUE(a.consistent());
}

}  // namespace
}  // namespace kvserve
