// What one forward step runs: a flat list of tokens from any number of sequences, each with its
// position, its cache slots and the block tables of its sequence: one of each per layer group
// of the cache (kv_cache/kv_layout.h), group after group.
#pragma once

#include <cstdint>
#include <vector>

namespace kvserve {

struct BatchInputs {
  std::vector<int32_t> tokens;        // [T] token ids
  std::vector<int32_t> positions;     // [T] position of each token in its sequence
  std::vector<int32_t> token_seq;     // [T] which sequence (row of block_tables) it belongs to
  std::vector<int64_t> slots;         // [n_groups, T] cache slot (block · block_size + offset) for its K/V
  std::vector<int32_t> block_tables;  // [n_groups, n_seqs, max_blocks] physical block ids, row-major
  int32_t max_blocks = 0;             // row length of block_tables
  std::vector<int32_t> logit_rows;    // indices into tokens whose logits are wanted, in order
  // Inspection, per token; all empty unless some sequence in the batch asked for it.
  std::vector<float*> attn_capture;       // [T] its AttentionCapture's probs at (layer 0, head 0, its row), or null
  std::vector<int32_t> attn_capture_len;  // [T] that capture's n_tokens
  std::vector<const uint8_t*> head_mask;  // [T] [n_layer·n_head] heads to zero (1), or null

  void clear() {
    tokens.clear();
    positions.clear();
    token_seq.clear();
    slots.clear();
    block_tables.clear();
    max_blocks = 0;
    logit_rows.clear();
    attn_capture.clear();
    attn_capture_len.clear();
    head_mask.clear();
  }
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  // Group g's block tables and slots, of n_groups.
  const int32_t* group_tables(int32_t g, int32_t n_groups) const {
    return block_tables.data() + static_cast<int64_t>(block_tables.size()) / n_groups * g;
  }
  const int64_t* group_slots(int32_t g) const { return slots.data() + size() * g; }
};

}  // namespace kvserve
