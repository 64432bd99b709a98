// Automatic prefix caching: allocator states and LRU eviction; a randomized run of thousands
// of submits, cancels, preemptions and evictions that checks the reference-count invariants
// every step (and that no shared block is ever written); and identical greedy outputs with the
// cache on and off for prefixes of every length relative to the block size.
#include <gtest/gtest.h>

#include <random>

#include "engine_harness.h"
#include "kv_cache/block_allocator.h"
#include "runtime/scheduler.h"
#include "test_support.h"

namespace kvserve {
namespace {

using testing::collect;
using testing::greedy_request;
using testing::shared_model;

TEST(BlockAllocatorCache, ReusesThenEvictsLeastRecentlyUsed) {
  BlockAllocator a(3);
  const int32_t t1[2] = {1, 2}, t2[2] = {3, 4};
  const uint64_t h1 = block_hash(0, t1, 2), h2 = block_hash(h1, t2, 2);
  int32_t b1 = a.allocate(), b2 = a.allocate();
  a.register_block(b1, h1, 0, t1, 2);
  a.register_block(b2, h2, h1, t2, 2);
  a.release(b1);
  a.release(b2);
  EXPECT_EQ(a.num_free(), 3);  // cached but unreferenced blocks count as free
  EXPECT_EQ(a.num_cached(), 2);
  EXPECT_EQ(a.lookup(h1, 0, t1, 2), b1);
  EXPECT_EQ(a.lookup(h2, 0, t2, 2), -1);  // same hash, wrong parent: no reuse
  const int32_t other[2] = {1, 9};
  EXPECT_EQ(a.lookup(h1, 0, other, 2), -1);
  a.retain(b2);  // b2 taken back; b1 is now the only evictable one
  EXPECT_EQ(a.ref_count(b2), 1);
  const int32_t fresh = a.allocate();  // the truly free block first
  EXPECT_NE(fresh, b1);
  EXPECT_EQ(a.allocate(), b1);  // then eviction of the LRU cached block
  EXPECT_EQ(a.lookup(h1, 0, t1, 2), -1);
  EXPECT_EQ(a.evictions(), 1);
  EXPECT_EQ(a.allocate(), -1);
  EXPECT_TRUE(a.consistent());
}

// Scheduler + allocator under random load with prefix caching, no model.
TEST(PrefixCacheInvariants, RandomSubmitsCancelsPreemptionsEvictions) {
  const int32_t bs = 4, blocks = 40;
  BlockAllocator alloc(blocks);
  Scheduler sched({.max_num_seqs = 8, .max_num_batched_tokens = 24, .max_model_len = 128}, alloc, bs, true);
  std::mt19937 rng(77);
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<Sequence*> live;
  // A few shared "system prompts"; requests take one and add their own tail.
  std::vector<std::vector<int32_t>> stems;
  for (int i = 0; i < 4; ++i) {
    std::vector<int32_t> s;
    for (int k = 0; k < 3 + static_cast<int>(rng() % 20); ++k) s.push_back(static_cast<int32_t>(rng() % 50));
    stems.push_back(s);
  }
  int submitted = 0, cancelled = 0, finished = 0;
  int64_t preempted = 0;
  for (int step = 0; step < 6000; ++step) {
    if (rng() % 2 == 0 && submitted < 3000) {
      Request r;
      r.prompt = stems[rng() % stems.size()];
      for (int k = 0; k < static_cast<int>(rng() % 10); ++k) r.prompt.push_back(static_cast<int32_t>(rng() % 50));
      r.prompt.insert(r.prompt.begin(), 1);
      r.sampling.max_new_tokens = 1 + static_cast<int>(rng() % 60);
      seqs.push_back(std::make_unique<Sequence>(seqs.size() + 1, r, bs));
      seqs.back()->max_tokens = static_cast<int32_t>(r.prompt.size()) + r.sampling.max_new_tokens;
      sched.add(seqs.back().get());
      live.push_back(seqs.back().get());
      ++submitted;
    }
    if (!live.empty() && rng() % 9 == 0) {  // cancel anyone, waiting or running
      const size_t i = rng() % live.size();
      sched.remove(live[i]);
      live.erase(live.begin() + static_cast<long>(i));
      ++cancelled;
    }
    SchedulerOutput out = sched.schedule();
    preempted += static_cast<int64_t>(out.preempted.size());
    for (const auto& c : out.chunks) {
      Sequence* s = c.seq;
      // Positions about to be written must lie in blocks this sequence holds alone.
      for (int64_t p = s->num_computed; p < s->num_computed + c.n_tokens; ++p)
        ASSERT_EQ(alloc.ref_count(s->tables[0].blocks()[p / bs]), 1) << "a shared block would be written";
      s->num_computed += c.n_tokens;
      sched.register_computed_blocks(s);
      if (c.samples) {
        s->tokens.push_back(static_cast<int32_t>(rng() % 50));
        if (static_cast<int32_t>(s->tokens.size()) >= s->max_tokens) {
          sched.remove(s);
          live.erase(std::find(live.begin(), live.end(), s));
          ++finished;
        }
      }
    }
    ASSERT_TRUE(alloc.consistent()) << "step " << step;
    int64_t held = 0;
    for (Sequence* s : live) held += static_cast<int64_t>(s->tables[0].blocks().size());
    ASSERT_GE(held, alloc.num_used());  // every used block is held by someone (sharing counts twice)
  }
  for (Sequence* s : live) sched.remove(s);
  EXPECT_TRUE(alloc.consistent());
  EXPECT_EQ(alloc.num_free(), blocks) << "every block is free or cached when all requests end";
  EXPECT_GT(alloc.evictions(), 0);
  EXPECT_GT(preempted, 0);
  EXPECT_GT(sched.prompt_tokens_cached(), 0);
  std::printf("submitted %d, cancelled %d, finished %d, preemptions %lld, evictions %lld, hit rate %.2f\n",
              submitted, cancelled, finished, static_cast<long long>(preempted),
              static_cast<long long>(alloc.evictions()),
              static_cast<double>(sched.prompt_tokens_cached()) / sched.prompt_tokens_admitted());
}

EngineOptions options(bool caching) {
  EngineOptions o;
  o.model.path = shared_model("stories260K.gguf");
  o.cache.block_size = 8;
  o.cache.num_blocks = 128;
  o.cache.enable_prefix_caching = caching;
  o.scheduler.max_model_len = 512;
  return o;
}

TEST(PrefixCacheOutputs, IdenticalWithCacheOnAndOff) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  std::vector<int32_t> base = {1};
  for (int i = 0; i < 39; ++i) base.push_back(259 + (i * 37) % 250);  // 40 tokens: 5 full blocks of 8
  // Shared prefix lengths: shorter than a block, exactly one, one plus a token, two, the whole prompt.
  const std::vector<int> shared = {5, 8, 9, 16, 40};
  std::vector<Request> reqs = {greedy_request(base, 30)};
  for (int len : shared) {
    std::vector<int32_t> p(base.begin(), base.begin() + len);
    if (len < 40)
      for (int k = 0; k < 7; ++k) p.push_back(300 + k * 11);
    reqs.push_back(greedy_request(p, 30));
  }
  auto run_all = [&](bool caching, std::vector<int32_t>* cached) {
    Engine engine(options(caching));
    std::vector<std::vector<int32_t>> outs;
    for (const auto& r : reqs) {  // one after another, so earlier prompts are in the cache
      auto sink = std::make_shared<QueueSink>();
      EXPECT_TRUE(engine.submit(r, sink).ok());
      auto o = collect(*sink);
      outs.push_back(o.tokens);
      cached->push_back(o.completion.cached_prompt_tokens);
    }
    engine.shutdown(Engine::Shutdown::kDrain, std::chrono::seconds(5));  // stats of the last step
    EngineStats s = engine.stats();
    EXPECT_EQ(s.blocks_free, s.blocks_total);
    if (caching) {
      EXPECT_GT(s.prefix_cache_hit_rate, 0.0);
      EXPECT_GT(s.cached_blocks, 0);
    }
    return outs;
  };
  std::vector<int32_t> cached_on, cached_off;
  auto on = run_all(true, &cached_on);
  auto off = run_all(false, &cached_off);
  ASSERT_EQ(on.size(), off.size());
  for (size_t i = 0; i < on.size(); ++i) EXPECT_EQ(on[i], off[i]) << "request " << i;
  // Cached tokens: whole blocks only, and never the block holding a prompt's last token.
  EXPECT_EQ(cached_on, (std::vector<int32_t>{0, 0, 8, 8, 16, 32}));
  EXPECT_EQ(cached_off, (std::vector<int32_t>{0, 0, 0, 0, 0, 0}));
}

}  // namespace
}  // namespace kvserve
