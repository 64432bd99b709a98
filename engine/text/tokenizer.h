// The vocabularies GGUF files carry: `llama` (SentencePiece-style BPE with scores and byte
// fallback) and `gpt2` (byte-level BPE with merges and the GPT-2 pre-tokenizer regex).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvserve {

class GgufFile;
class PreTokenizer;

enum class TokenKind : int32_t {
  kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6,
};

class Tokenizer {
 public:
  enum class Model { kSpm, kBpe };

  // Reads tokenizer.ggml.* from the file; throws GgufError naming the key on bad metadata.
  explicit Tokenizer(const GgufFile& file);
  ~Tokenizer();

  // Text to token ids. add_special adds BOS and EOS where the vocab asks for them
  // (add_bos_token, add_eos_token). Text spelling a user-defined token is always that token;
  // with parse_special, so is text spelling a control token ("<|im_start|>"), as llama.cpp's
  // server and vLLM read prompts.
  std::vector<int32_t> encode(std::string_view text, bool add_special, bool parse_special = true) const;
  // Token ids to text; control tokens are skipped and broken UTF-8 becomes U+FFFD.
  std::string decode(const std::vector<int32_t>& ids) const;

  // The raw bytes token `id` stands for (control tokens: empty). No leading-space handling.
  std::string token_bytes(int32_t id) const;
  const std::string& token_text(int32_t id) const { return tokens_[id]; }
  TokenKind token_kind(int32_t id) const { return kinds_[id]; }

  Model model() const { return model_; }
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }
  bool adds_bos() const { return add_bos_; }
  bool adds_eos() const { return add_eos_; }
  // Whether generating `id` ends the generation: EOS, EOT, EOM, and the end-of-turn tokens
  // llama.cpp recognises by their text (<|eot_id|>, <|im_end|>, <end_of_turn>, ...).
  bool is_end_of_generation(int32_t id) const { return id >= 0 && id < vocab_size() && eog_[id]; }
  const std::vector<int32_t>& end_of_generation_ids() const { return eog_ids_; }
  // SentencePiece drops the dummy-prefix space of the first piece when decoding.
  bool strips_first_space() const { return model_ == Model::kSpm && add_space_prefix_; }

 private:
  // A piece of the text, or a special token found in it.
  struct Fragment {
    std::string_view text;
    int32_t token = -1;  // >= 0: this token, text unused
  };
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  void init_special(const GgufFile& file);
  void encode_spm(std::string_view text, bool space_prefix, std::vector<int32_t>& out) const;
  void encode_bpe(std::string_view text, std::vector<int32_t>& out) const;
  void bpe_word(const std::string& word, std::vector<int32_t>& out) const;
  void init_bpe(const GgufFile& file);
  std::string bpe_token_bytes(const std::string& text) const;
  int32_t find(const std::string& text) const;  // -1 if absent

  Model model_ = Model::kSpm;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<TokenKind> kinds_;
  std::unordered_map<std::string, int32_t> index_;
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left right" -> rank (gpt2)
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  std::vector<int32_t> special_;  // user-defined, control and unknown tokens, longest text first
  std::vector<uint8_t> eog_;      // [n_vocab] 1: ends generation
  std::vector<int32_t> eog_ids_;
  bool add_space_prefix_ = true;
  int32_t byte_tokens_[256];  // SPM <0xXX> tokens, or gpt2 single-byte tokens
  std::vector<std::string> byte_to_unicode_;  // gpt2: byte -> its printable stand-in
  std::unordered_map<char32_t, uint8_t> unicode_to_byte_;
  std::shared_ptr<const PreTokenizer> pre_;  // gpt2: tokenizer.ggml.pre's (shared_ptr: complete where it is made)
};

// Turns a stream of generated token ids into text without ever emitting half a UTF-8
// character: bytes of an unfinished character wait for the next token.
class IncrementalDecoder {
 public:
  // `context` is what precedes the generated tokens (the prompt); it decides whether the first
  // generated piece is at the very start of the text (where SentencePiece drops its space).
  // special: control tokens that do not end generation are written as their text (a chat format
  // that marks tool calls or channels with them, such as gpt-oss's <|channel|>).
  IncrementalDecoder(const Tokenizer& tokenizer, const std::vector<int32_t>& context, bool special = false);
  std::string push(int32_t id);  // newly completed text (may be empty)
  std::string flush();           // what remains at the end, broken bytes as U+FFFD

 private:
  const Tokenizer& tokenizer_;
  bool at_start_;
  bool special_;
  std::string pending_;
};

}  // namespace kvserve
