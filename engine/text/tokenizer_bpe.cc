// Byte-level BPE for `gpt2` vocabularies: the pre-tokenizer of tokenizer.ggml.pre splits the
// text, each piece's bytes are mapped to printable stand-ins, and merges are applied lowest rank
// first, leftmost first among equals.
#include <queue>
#include <stdexcept>

#include "gguf/gguf.h"
#include "text/pre_tokenizer.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace kvserve {
namespace {

struct Bigram {
  int left;
  int right;
  int rank;
  size_t len;
};

// Lowest rank first; among equals the leftmost pair.
struct BigramOrder {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

void Tokenizer::init_bpe(const GgufFile& file) {
  // GPT-2's byte <-> printable character table: printable Latin-1 bytes stand for themselves,
  // the rest take code points from 256 up, in byte order.
  byte_to_unicode_.assign(256, {});
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    char32_t cp = printable ? static_cast<char32_t>(b) : next++;
    utf8_append(byte_to_unicode_[b], cp);
    unicode_to_byte_[cp] = static_cast<uint8_t>(b);
    byte_tokens_[b] = find(byte_to_unicode_[b]);
  }
  const auto& merges = file.get("tokenizer.ggml.merges").as_array("tokenizer.ggml.merges");
  merge_rank_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string& m = merges[i].as_string("tokenizer.ggml.merges");
    if (m.find(' ', 1) == std::string::npos)
      throw GgufError(file.path() + ": tokenizer.ggml.merges[" + std::to_string(i) + "] '" + m +
                      "' is not two pieces separated by a space");
    merge_rank_.emplace(m, static_cast<int>(i));
  }
  // A vocabulary without the key is run as llama.cpp runs it: with its default pre-tokenizer.
  std::string pre;
  if (const GgufValue* v = file.find("tokenizer.ggml.pre")) pre = v->as_string("tokenizer.ggml.pre");
  try {
    pre_ = std::make_shared<const PreTokenizer>(pre);
  } catch (const std::invalid_argument& e) {
    throw GgufError(file.path() + ": tokenizer.ggml.pre: " + e.what());
  }
}

std::string Tokenizer::bpe_token_bytes(const std::string& text) const {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    int n = utf8_sequence_length(text, i);
    if (n <= 0) {
      out += text[i++];
      continue;
    }
    // Decode the code point and map it back to its byte.
    char32_t cp = static_cast<unsigned char>(text[i]);
    if (n > 1) {
      cp &= 0x7F >> n;
      for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    }
    auto it = unicode_to_byte_.find(cp);
    if (it != unicode_to_byte_.end())
      out += static_cast<char>(it->second);
    else
      out.append(text, i, n);
    i += n;
  }
  return out;
}

void Tokenizer::encode_bpe(std::string_view text, std::vector<int32_t>& out) const {
  for (std::string_view piece : pre_->split(text)) {
    if (pre_->ignore_merges()) {
      std::string mapped;
      for (unsigned char b : piece) mapped += byte_to_unicode_[b];
      if (const int32_t id = find(mapped); id >= 0) {
        out.push_back(id);
        continue;
      }
    }
    bpe_word(std::string(piece), out);
  }
}

void Tokenizer::bpe_word(const std::string& word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  std::string text;
  std::vector<size_t> starts;
  for (unsigned char b : word) {
    starts.push_back(text.size());
    text += byte_to_unicode_[b];
  }
  struct Sym {
    int prev, next;
    size_t start, len;
  };
  std::vector<Sym> syms;
  for (size_t i = 0; i < starts.size(); ++i) {
    size_t end = i + 1 < starts.size() ? starts[i + 1] : text.size();
    syms.push_back({static_cast<int>(i) - 1, static_cast<int>(i) + 1, starts[i], end - starts[i]});
  }
  syms.back().next = -1;

  std::priority_queue<Bigram, std::vector<Bigram>, BigramOrder> queue;
  auto try_add = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    std::string key = text.substr(syms[l].start, syms[l].len);
    key += ' ';
    key.append(text, syms[r].start, syms[r].len);
    auto it = merge_rank_.find(key);
    if (it == merge_rank_.end()) return;
    queue.push({l, r, it->second, syms[l].len + syms[r].len});
  };
  for (size_t i = 1; i < syms.size(); ++i) try_add(static_cast<int>(i) - 1, static_cast<int>(i));
  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Sym& l = syms[b.left];
    Sym& r = syms[b.right];
    if (l.len == 0 || r.len == 0 || l.next != b.right || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int i = 0; i != -1; i = syms[i].next) {
    int32_t id = find(text.substr(syms[i].start, syms[i].len));
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    // A piece with no token of its own: one token per byte.
    for (size_t k = 0; k < starts.size(); ++k) {
      if (starts[k] < syms[i].start || starts[k] >= syms[i].start + syms[i].len) continue;
      int32_t bid = byte_tokens_[static_cast<unsigned char>(word[k])];
      if (bid >= 0) out.push_back(bid);
    }
  }
}

}  // namespace kvserve
