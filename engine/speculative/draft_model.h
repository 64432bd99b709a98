// Proposals from a draft model: a second, smaller model with the target's vocabulary that
// decodes greedily ahead of each sequence. It keeps a paged KV cache of its own, one block table
// per sequence: each step it runs what it has not yet seen of the sequence (the whole prompt the
// first time, afterwards the tokens verification kept), then k - 1 single-token passes, every
// speculating sequence in the same passes. What the target rejected is rolled back by keeping
// only the prefix of what the draft ran that the sequence still has.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "gguf/gguf.h"
#include "kv_cache/block_allocator.h"
#include "kv_cache/block_table.h"
#include "kv_cache/kv_storage.h"
#include "model/model.h"
#include "speculative/proposer.h"
#include "text/tokenizer.h"

namespace kvserve {

struct DraftModelOptions {
  std::string path;             // the draft's GGUF file
  int64_t cache_bytes = 0;      // its KV cache's budget
  int32_t block_size = 16;      // positions per block of that cache
  // Bytes per K/V value as stored: 4, 2, or 1 (q8_0; 2 instead when the draft's rows are not
  // whole blocks of 32 values).
  int32_t element_bytes = 4;
  int32_t max_rows = 256;       // rows in one forward pass at most (a long prompt runs in parts)
  ModelLoadOptions load;
};

class DraftModelProposer : public Proposer {
 public:
  // ConfigError, naming speculative.draft_model, when the file cannot be loaded or its vocabulary
  // is not the target's token for token; naming speculative.draft_cache_share when the budget
  // holds no block.
  DraftModelProposer(const DraftModelOptions& options, const Tokenizer& target);

  void propose(std::span<const ProposalRequest> requests) override;
  void forget(uint64_t id) override;
  double pass_seconds() const override { return pass_seconds_; }

  const ModelHparams& hparams() const { return model_->hparams(); }
  int32_t num_blocks() const { return alloc_->num_blocks(); }
  int32_t blocks_free() const { return alloc_->num_free(); }
  int64_t cache_bytes() const { return kv_->total_bytes(); }
  const std::string& weight_types() const { return model_->hparams().file_types; }

 private:
  struct State {
    explicit State(int32_t block_size) : table(block_size) {}
    BlockTable table;
    std::vector<int32_t> fed;  // the tokens whose K/V the draft holds, position by position
    uint64_t used = 0;         // the propose() call that last used it
  };
  // One sequence's rows of a pass: its tokens from position `from` on, the last one's logits
  // wanted when `sample`.
  struct Rows {
    State* state;
    std::vector<int32_t>* out;
    int64_t from;
    std::vector<int32_t> tokens;
    bool sample;
  };
  // Grows a sequence's table to n positions, dropping other sequences' states (least recently
  // used first, never one of this call's) while the pool is short. False if it stays short.
  bool make_room(State& state, int64_t n);
  // Runs one pass over `rows` and appends the greedy token of each sampled row to its out.
  void run(std::vector<Rows>& rows);

  std::unique_ptr<GgufFile> file_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<KvStorage> kv_;
  std::unique_ptr<BlockAllocator> alloc_;
  std::unordered_map<uint64_t, State> states_;
  int32_t block_size_;
  int32_t max_rows_;
  int64_t position_limit_;  // positions the draft has (learned position tables end)
  uint64_t calls_ = 0;
  double pass_seconds_ = 0;  // a moving average over passes of one token per sequence
  BatchInputs batch_;
};

}  // namespace kvserve
