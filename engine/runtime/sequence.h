// One request's state inside the engine: its tokens (prompt, then generated), how many of them
// have K/V in the cache, its blocks, and what it needs to sample and stream.
#pragma once

#include <chrono>
#include <memory>
#include <vector>

#include "kv_cache/block_table.h"
#include "text/output_text.h"
#include "common/request.h"
#include "grammar/matcher.h"
#include "sampling/sampler.h"

namespace kvserve {

enum class SeqStatus { kWaiting, kRunning, kFinished };

struct Sequence {
  using Clock = std::chrono::steady_clock;

  // n_groups: the cache's layer groups (kv_cache/kv_layout.h), a block table each.
  Sequence(uint64_t id_, Request request_, int32_t block_size, int32_t n_groups = 1)
      : id(id_), request(std::move(request_)), tokens(request.prompt),
        num_prompt(static_cast<int32_t>(request.prompt.size())), tables(n_groups, BlockTable(block_size)) {}

  uint64_t id;
  Request request;
  std::vector<int32_t> tokens;   // prompt, then every generated token
  int32_t num_prompt;
  int64_t num_computed = 0;      // leading tokens whose K/V are in the cache
  int32_t max_tokens = 0;        // total length at which it must stop (prompt + max new, capped)
  std::vector<BlockTable> tables;  // [n_groups] one per layer group of the cache
  SeqStatus status = SeqStatus::kWaiting;
  int32_t preemptions = 0;
  std::vector<uint64_t> block_hashes;  // chained hashes of the leading full, computed blocks
  uint64_t prefix_root = 0;            // the chain's start: 0, or the hash of Request::cache_salt
  int32_t cached_prompt_tokens = 0;    // prompt tokens taken from the prefix cache at admission
  bool shares_cache = true;            // false: its KV never enters nor comes from the prefix cache

  // Engine-side state (absent in scheduler-only tests).
  std::shared_ptr<ResultSink> sink;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<OutputText> text;
  std::unique_ptr<grammar::GrammarMatcher> matcher;  // with sampling.constraint
  std::vector<uint64_t> mask;                        // the matcher's allowed tokens, reused per step
  Clock::time_point submitted{};
  Clock::time_point first_token{};
  Clock::time_point deadline = Clock::time_point::max();
  int32_t peak_blocks = 0;
  // Inspection (see InspectOptions); empty unless asked for.
  std::shared_ptr<AttentionCapture> capture;
  std::vector<uint8_t> head_mask;  // [n_layer·n_head], 1 = zero that head's output
  std::vector<float> prompt_logprobs;  // [num_prompt - 1] log p(prompt[i+1] | prompt[..i]), set as computed
  std::vector<TokenLogprob> prompt_token_logprobs;  // the same with alternatives, when sampling.prompt_logprobs asks
  // Prompt tokens per step at most (0 = any): a scored prompt holds a row of logits per token.
  int32_t max_chunk = 0;
  // Speculative decoding: the tokens proposed to follow tokens.back(), verified in the step that
  // computes it (the scheduler may shorten or drop them); proposed tokens accepted and refused
  // lately (counts that fade, for its acceptance rate); steps to skip proposing while proposing
  // does not pay, and how long the next such pause is (it doubles while it goes on not paying).
  std::vector<int32_t> draft;
  float draft_hits = 0, draft_misses = 0;
  int32_t draft_pause = 0;
  int32_t draft_backoff = 0;

  // Blocks held now, over every group.
  int32_t blocks_held() const {
    int32_t n = 0;
    for (const BlockTable& t : tables) n += t.held();
    return n;
  }
  // Blocks still to allocate, over every group, so that positions [0, n_tokens) have slots.
  int64_t blocks_needed(int64_t n_tokens) const {
    int64_t n = 0;
    for (const BlockTable& t : tables) n += t.blocks_needed(n_tokens);
    return n;
  }
  int32_t num_generated() const { return static_cast<int32_t>(tokens.size()) - num_prompt; }
  // Tokens still to run through the model before the next one can be sampled.
  int64_t num_uncomputed() const { return static_cast<int64_t>(tokens.size()) - num_computed; }
};

}  // namespace kvserve
