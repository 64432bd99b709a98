// SentencePiece-style BPE as llama.cpp runs it for `llama` vocabularies: spaces become "▁",
// a dummy "▁" prefix is added, then the adjacent pair whose merged text is the highest-scoring
// vocab entry is merged until none is left; characters with no token fall back to <0xXX> bytes.
#include <queue>

#include "text/tokenizer.h"
#include "text/utf8.h"

namespace kvserve {
namespace {

struct Symbol {
  int prev;
  int next;
  size_t start;  // into the escaped text
  size_t len;    // 0 once merged into its left neighbour
};

struct Bigram {
  int left;
  int right;
  float score;
  size_t len;
};

// Highest score first; among equals the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::encode_spm(std::string_view raw, bool space_prefix, std::vector<int32_t>& out) const {
  std::string text;
  text.reserve(raw.size() + 8);
  if (space_prefix) text += "\xE2\x96\x81";
  for (char c : raw) {
    if (c == ' ')
      text += "\xE2\x96\x81";
    else
      text += c;
  }

  std::vector<Symbol> symbols;
  for (size_t i = 0; i < text.size();) {
    int n = utf8_sequence_length(text, i);
    size_t len = n > 0 ? static_cast<size_t>(n) : (n < 0 ? static_cast<size_t>(-n) : 1);
    int idx = static_cast<int>(symbols.size());
    symbols.push_back({idx - 1, idx + 1, i, len});
    i += len;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    std::string merged = text.substr(symbols[left].start, symbols[left].len + symbols[right].len);
    int32_t id = find(merged);
    if (id < 0) return;
    queue.push({left, right, scores_[id], merged.size()});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Symbol& l = symbols[b.left];
    Symbol& r = symbols[b.right];
    // Skip pairs made stale by an earlier merge.
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }

  // Every merge produced a vocab token, so a final symbol is either a token or a single
  // character that never merged; a character with no token falls back to its bytes.
  for (int i = 0; i != -1; i = symbols[i].next) {
    const int32_t id = find(text.substr(symbols[i].start, symbols[i].len));
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (size_t k = symbols[i].start; k < symbols[i].start + symbols[i].len; ++k) {
      const int32_t bid = byte_tokens_[static_cast<unsigned char>(text[k])];
      if (bid >= 0) out.push_back(bid);
    }
  }
}

}  // namespace kvserve
