// How the layers of a model share KV blocks. Layers that attend over the same window form
// groups of equal size; each group has a block table of its own in every sequence, so that a
// windowed group's blocks are released once its window has left them behind while a full
// group keeps its own. All groups draw from one pool of blocks, a block holding block_size
// positions of one group's layers; sequences short of a window therefore cost what they did
// with one table, and a long sequence holds about n_full · T + n_windowed · W token-layers.
// A model whose layers all see every position has one group of all layers: one table, as
// before. (vLLM's hybrid KV cache manager groups layers the same way.)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvserve {

struct KvLayout {
  int32_t layers_per_group = 0;      // layers whose K/V one block holds
  std::vector<int32_t> group_window; // [n_groups] the window of the group's layers (0: every position)
  std::vector<int32_t> layer_group;  // [n_layer] the group a layer belongs to
  std::vector<int32_t> layer_index;  // [n_layer] its place in the group: which K/V buffer holds it

  int32_t n_groups() const { return static_cast<int32_t>(group_window.size()); }
  int32_t n_layers() const { return static_cast<int32_t>(layer_group.size()); }

  // Every layer in one full group.
  static KvLayout single(int32_t n_layers);
  // Groups from per-layer windows (0: every position). A window at least max_len wide never
  // leaves a block behind within a request, so such layers count as full.
  static KvLayout plan(const std::vector<int32_t>& layer_windows, int64_t max_len);

  // The most blocks of group g one sequence of `tokens` positions holds at once, when each
  // step adds at most `chunk` positions: every block, or under a window the window behind the
  // step's first position plus the step's own, each end possibly in a partly used block.
  int64_t blocks_held(int32_t g, int64_t tokens, int32_t block_size, int64_t chunk) const;
  // Summed over the groups.
  int64_t blocks_held(int64_t tokens, int32_t block_size, int64_t chunk) const;
  // "6 groups of 1 layer: 5 windowed (32 positions), 1 full", for logs.
  std::string describe() const;
};

}  // namespace kvserve
