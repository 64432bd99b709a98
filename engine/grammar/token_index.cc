#include "grammar/token_index.h"

#include <algorithm>

namespace kvserve::grammar {

TokenIndex::TokenIndex(std::vector<std::string> bytes, std::vector<int32_t> eog)
    : bytes_(std::move(bytes)), eog_(std::move(eog)), is_eog_(bytes_.size(), 0) {
  std::erase_if(eog_, [&](int32_t t) { return t < 0 || t >= vocab_size(); });
  for (int32_t t : eog_) is_eog_[t] = 1;
  for (int32_t t = 0; t < vocab_size(); ++t)
    if (!bytes_[t].empty() && !is_eog_[t]) sorted_.push_back(t);
  std::stable_sort(sorted_.begin(), sorted_.end(), [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });
  lcp_.assign(sorted_.size(), 0);
  for (size_t i = 0; i < sorted_.size(); ++i) {
    const std::string& s = bytes_[sorted_[i]];
    max_len_ = std::max(max_len_, s.size());
    if (i == 0) continue;
    const std::string& p = bytes_[sorted_[i - 1]];
    size_t k = 0;
    while (k < s.size() && k < p.size() && s[k] == p[k]) ++k;
    lcp_[i] = static_cast<uint32_t>(k);
  }
  offset_.push_back(0);
  for (int32_t t : sorted_) {
    packed_ += bytes_[t];
    offset_.push_back(static_cast<uint32_t>(packed_.size()));
  }
  size_t i = 0;
  for (int b = 0; b <= 256; ++b) {
    while (i < sorted_.size() && static_cast<uint8_t>(bytes_[sorted_[i]][0]) < b) ++i;
    bucket_[b] = static_cast<uint32_t>(b == 256 ? sorted_.size() : i);
  }
}

}  // namespace kvserve::grammar
