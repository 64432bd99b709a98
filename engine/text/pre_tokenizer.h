// Byte-level BPE pre-tokenizers, chosen by tokenizer.ggml.pre: each is a list of regexes applied
// in turn, every one splitting each piece the previous ones left into its matches and the text
// between them (both kept), as llama.cpp's unicode_regex_split does. PCRE2 with Unicode
// properties runs them; a piece's end counts as the end of the text for lookaheads and `$`.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvserve {

class PreTokenizer {
 public:
  // The pre-tokenizer named `pre` (a tokenizer.ggml.pre value; empty: llama.cpp's default);
  // std::invalid_argument naming the value and the known ones for any other.
  explicit PreTokenizer(const std::string& pre);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  const std::string& name() const { return name_; }
  // Llama 3's rule: a piece that is a vocabulary entry as a whole becomes that token, merges aside.
  bool ignore_merges() const { return ignore_merges_; }
  // The pieces of text, in order; together they are the text.
  std::vector<std::string_view> split(std::string_view text) const;

  // "default, gpt-2, llama-bpe, ..." for messages.
  static std::string known_names();

 private:
  struct Regex;
  std::string name_;
  std::vector<std::unique_ptr<Regex>> regexes_;
  bool ignore_merges_ = false;
};

}  // namespace kvserve
