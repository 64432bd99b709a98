// Test helper: runs sequences straight through DecoderModel with their own block tables, in
// whatever batch composition the test asks for. The engine's scheduler is not involved.
#pragma once

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include "kv_cache/block_allocator.h"
#include "kv_cache/block_table.h"
#include "kv_cache/kv_storage.h"
#include "model/decoder_model.h"

namespace kvserve::testing {

struct RunSeq {
  std::vector<int32_t> tokens;  // everything fed so far, then appended with generated ids
  BlockTable table;
  int64_t computed = 0;  // tokens whose K/V are in the cache
};

class ModelRunner {
 public:
  // element_bytes: the cache's K/V elements (4 f32, 2 f16, 1 q8_0). The cache has one block
  // table for every layer, whatever the model's windows.
  ModelRunner(DecoderModel& model, int32_t block_size, int32_t num_blocks, uint32_t shuffle_seed = 0,
              int32_t element_bytes = 4)
      : model_(model), kv_(shape(model, element_bytes), block_size, num_blocks), alloc_(num_blocks) {
    // Take the blocks in a scrambled order so block tables are non-contiguous.
    if (shuffle_seed) {
      std::vector<int32_t> taken;
      for (int32_t i = 0; i < num_blocks; ++i) taken.push_back(alloc_.allocate());
      std::shuffle(taken.begin(), taken.end(), std::mt19937(shuffle_seed));
      for (int32_t b : taken) alloc_.release(b);
    }
  }

  // Feeds, for every sequence i, its next chunk[i] unfed tokens in one forward call and
  // returns logits of each sequence's last fed token ([n, vocab], only for chunk[i] > 0).
  std::vector<std::vector<float>> step(std::vector<RunSeq*> seqs, const std::vector<int64_t>& chunk) {
    BatchInputs in;
    int32_t max_blocks = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      RunSeq& s = *seqs[i];
      if (!s.table.grow_to(s.computed + chunk[i], alloc_)) throw std::runtime_error("cache full");
      max_blocks = std::max<int32_t>(max_blocks, static_cast<int32_t>(s.table.blocks().size()));
    }
    in.max_blocks = max_blocks;
    in.block_tables.assign(seqs.size() * max_blocks, -1);
    for (size_t i = 0; i < seqs.size(); ++i) {
      RunSeq& s = *seqs[i];
      std::copy(s.table.blocks().begin(), s.table.blocks().end(), in.block_tables.begin() + i * max_blocks);
      for (int64_t p = s.computed; p < s.computed + chunk[i]; ++p) {
        in.tokens.push_back(s.tokens[p]);
        in.positions.push_back(static_cast<int32_t>(p));
        in.token_seq.push_back(static_cast<int32_t>(i));
        in.slots.push_back(s.table.slot(p));
      }
      if (chunk[i] > 0) in.logit_rows.push_back(static_cast<int32_t>(in.tokens.size()) - 1);
      s.computed += chunk[i];
    }
    const float* logits = model_.forward(in, kv_);
    const int32_t V = model_.hparams().n_vocab;
    std::vector<std::vector<float>> out;
    for (size_t r = 0; r < in.logit_rows.size(); ++r) out.emplace_back(logits + r * V, logits + (r + 1) * V);
    return out;
  }

  // Greedy generation of one sequence on its own: whole prompt in one step, then one token a step.
  std::vector<int32_t> greedy(const std::vector<int32_t>& prompt, int n_new) {
    RunSeq s{prompt, BlockTable(kv_.block_size()), 0};
    std::vector<int32_t> out;
    int64_t chunk = static_cast<int64_t>(prompt.size());
    for (int i = 0; i < n_new; ++i) {
      auto logits = step({&s}, {chunk})[0];
      int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      out.push_back(next);
      s.tokens.push_back(next);
      chunk = 1;
    }
    s.table.release_all(alloc_);
    return out;
  }

  BlockAllocator& allocator() { return alloc_; }
  static KvShape shape(const DecoderModel& model, int32_t element_bytes) {
    KvShape s = model.kv_shape();
    s.element_bytes = element_bytes;
    return s;
  }
  int32_t block_size() const { return kv_.block_size(); }

 private:
  DecoderModel& model_;
  KvStorage kv_;
  BlockAllocator alloc_;
};

}  // namespace kvserve::testing
