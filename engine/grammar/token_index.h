// A vocabulary as the grammar sees it: each token's bytes, the text tokens sorted by their bytes
// (a trie walked in order: each token's shared prefix with the one before is already matched),
// and the tokens that end generation. Built once per model; shared by every constrained request.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kvserve::grammar {

class TokenIndex {
 public:
  // bytes[id]: what token id writes ("" = never allowed by a grammar: control and unused
  // tokens); eog: the tokens that end generation, allowed where the grammar is complete.
  TokenIndex(std::vector<std::string> bytes, std::vector<int32_t> eog);

  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  const std::vector<int32_t>& eog() const { return eog_; }
  bool is_eog(int32_t id) const { return is_eog_[id] != 0; }
  // Text tokens in byte order, each one's common prefix length with the one before it, and
  // where each first byte's run begins (begin(b) .. begin(b + 1)).
  const std::vector<int32_t>& sorted() const { return sorted_; }
  // The bytes of sorted()[i], from one buffer in sorted order (a walk reads it front to back).
  std::string_view sorted_bytes(size_t i) const {
    return std::string_view(packed_).substr(offset_[i], offset_[i + 1] - offset_[i]);
  }
  uint32_t lcp(size_t i) const { return lcp_[i]; }
  uint32_t begin(int b) const { return bucket_[b]; }
  size_t max_length() const { return max_len_; }

 private:
  std::vector<std::string> bytes_;
  std::vector<int32_t> eog_;
  std::vector<uint8_t> is_eog_;
  std::vector<int32_t> sorted_;
  std::vector<uint32_t> lcp_;
  std::string packed_;
  std::vector<uint32_t> offset_;  // [sorted + 1]
  uint32_t bucket_[257] = {};
  size_t max_len_ = 0;
};

}  // namespace kvserve::grammar
