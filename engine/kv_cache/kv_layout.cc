#include "kv_cache/kv_layout.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace kvserve {

KvLayout KvLayout::single(int32_t n_layers) { return plan(std::vector<int32_t>(n_layers, 0), 0); }

KvLayout KvLayout::plan(const std::vector<int32_t>& layer_windows, int64_t max_len) {
  const int32_t n = static_cast<int32_t>(layer_windows.size());
  std::vector<int32_t> window(n);
  for (int32_t l = 0; l < n; ++l)
    window[l] = layer_windows[l] > 0 && (max_len == 0 || layer_windows[l] < max_len) ? layer_windows[l] : 0;
  // Layers per window, in order of first appearance; a group size dividing every count.
  std::map<int32_t, std::vector<int32_t>> by_window;
  std::vector<int32_t> order;
  for (int32_t l = 0; l < n; ++l) {
    if (!by_window.count(window[l])) order.push_back(window[l]);
    by_window[window[l]].push_back(l);
  }
  KvLayout out;
  out.layers_per_group = 0;
  for (const auto& [w, layers] : by_window)
    out.layers_per_group = std::gcd(out.layers_per_group, static_cast<int32_t>(layers.size()));
  out.layer_group.resize(n);
  out.layer_index.resize(n);
  for (int32_t w : order) {
    const std::vector<int32_t>& layers = by_window[w];
    for (size_t i = 0; i < layers.size(); ++i) {
      if (i % out.layers_per_group == 0) out.group_window.push_back(w);
      out.layer_group[layers[i]] = out.n_groups() - 1;
      out.layer_index[layers[i]] = static_cast<int32_t>(i % out.layers_per_group);
    }
  }
  return out;
}

int64_t KvLayout::blocks_held(int32_t g, int64_t tokens, int32_t block_size, int64_t chunk) const {
  const int64_t full = (tokens + block_size - 1) / block_size;
  const int32_t w = group_window[g];
  if (w == 0) return full;
  const int64_t span = int64_t{w} - 1 + chunk;
  return std::min(full, (span + block_size - 1) / block_size + 1);
}

int64_t KvLayout::blocks_held(int64_t tokens, int32_t block_size, int64_t chunk) const {
  int64_t n = 0;
  for (int32_t g = 0; g < n_groups(); ++g) n += blocks_held(g, tokens, block_size, chunk);
  return n;
}

std::string KvLayout::describe() const {
  std::map<int32_t, int32_t> layers;  // window -> layers
  for (int32_t w : group_window) layers[w] += layers_per_group;
  std::string s = std::to_string(n_groups()) + (n_groups() == 1 ? " group of " : " groups of ") +
                  std::to_string(layers_per_group) + (layers_per_group == 1 ? " layer:" : " layers:");
  bool first = true;
  for (auto it = layers.rbegin(); it != layers.rend(); ++it) {
    s += std::string(first ? " " : ", ") + std::to_string(it->second) +
         (it->first ? " windowed (" + std::to_string(it->first) + " positions)" : " full");
    first = false;
  }
  return s;
}

}  // namespace kvserve
