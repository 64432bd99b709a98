#include "text/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "gguf/gguf.h"
#include "text/utf8.h"

namespace kvserve {
namespace {

int32_t optional_id(const GgufFile& f, const std::string& key, int32_t fallback, size_t n_vocab) {
  const GgufValue* v = f.find(key);
  if (!v) return fallback;
  int64_t id = v->as_int(key);
  // 0xFFFFFFFF (and anything else outside the vocab) means "no such token".
  return id >= 0 && static_cast<size_t>(id) < n_vocab ? static_cast<int32_t>(id) : -1;
}

}  // namespace

Tokenizer::Tokenizer(const GgufFile& file) {
  const std::string& model = file.get("tokenizer.ggml.model").as_string("tokenizer.ggml.model");
  if (model == "llama") {
    model_ = Model::kSpm;
  } else if (model == "gpt2") {
    model_ = Model::kBpe;
  } else {
    throw GgufError(file.path() + ": unsupported tokenizer.ggml.model '" + model +
                    "' (llama and gpt2 are supported)");
  }
  const auto& tokens = file.get("tokenizer.ggml.tokens").as_array("tokenizer.ggml.tokens");
  if (tokens.empty()) throw GgufError(file.path() + ": tokenizer.ggml.tokens is empty");
  if (tokens.size() > (1u << 24)) throw GgufError(file.path() + ": tokenizer.ggml.tokens too large");
  const size_t n = tokens.size();
  tokens_.reserve(n);
  for (const auto& t : tokens) tokens_.push_back(t.as_string("tokenizer.ggml.tokens"));
  scores_.assign(n, 0.0f);
  if (const GgufValue* s = file.find("tokenizer.ggml.scores")) {
    const auto& arr = s->as_array("tokenizer.ggml.scores");
    if (arr.size() != n)
      throw GgufError(file.path() + ": tokenizer.ggml.scores has " + std::to_string(arr.size()) +
                      " entries for " + std::to_string(n) + " tokens");
    for (size_t i = 0; i < n; ++i) scores_[i] = static_cast<float>(arr[i].as_float("tokenizer.ggml.scores"));
  }
  kinds_.assign(n, TokenKind::kNormal);
  if (const GgufValue* t = file.find("tokenizer.ggml.token_type")) {
    const auto& arr = t->as_array("tokenizer.ggml.token_type");
    if (arr.size() != n)
      throw GgufError(file.path() + ": tokenizer.ggml.token_type has " + std::to_string(arr.size()) +
                      " entries for " + std::to_string(n) + " tokens");
    for (size_t i = 0; i < n; ++i) {
      int64_t k = arr[i].as_int("tokenizer.ggml.token_type");
      kinds_[i] = (k >= 1 && k <= 6) ? static_cast<TokenKind>(k) : TokenKind::kNormal;
    }
  }
  for (size_t i = 0; i < n; ++i) index_.emplace(tokens_[i], static_cast<int32_t>(i));

  const bool spm = model_ == Model::kSpm;
  bos_id_ = optional_id(file, "tokenizer.ggml.bos_token_id", spm ? 1 : -1, n);
  eos_id_ = optional_id(file, "tokenizer.ggml.eos_token_id", spm ? 2 : -1, n);
  if (const GgufValue* v = file.find("tokenizer.ggml.add_bos_token"))
    add_bos_ = v->as_bool("tokenizer.ggml.add_bos_token");
  else
    add_bos_ = spm;
  if (const GgufValue* v = file.find("tokenizer.ggml.add_space_prefix"))
    add_space_prefix_ = v->as_bool("tokenizer.ggml.add_space_prefix");
  else
    add_space_prefix_ = spm;
  if (add_bos_ && bos_id_ < 0) add_bos_ = false;
  if (const GgufValue* v = file.find("tokenizer.ggml.add_eos_token")) add_eos_ = v->as_bool("tokenizer.ggml.add_eos_token");
  if (add_eos_ && eos_id_ < 0) add_eos_ = false;
  init_special(file);

  for (int b = 0; b < 256; ++b) byte_tokens_[b] = -1;
  if (spm) {
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
      byte_tokens_[b] = find(hex);
    }
  } else {
    init_bpe(file);
  }
}

Tokenizer::~Tokenizer() = default;

int32_t Tokenizer::find(const std::string& text) const {
  auto it = index_.find(text);
  return it == index_.end() ? -1 : it->second;
}

void Tokenizer::init_special(const GgufFile& file) {
  const int32_t n = vocab_size();
  for (int32_t id = 0; id < n; ++id) {
    const TokenKind k = kinds_[id];
    if ((k == TokenKind::kControl || k == TokenKind::kUserDefined || k == TokenKind::kUnknown) && !tokens_[id].empty())
      special_.push_back(id);
  }
  std::stable_sort(special_.begin(), special_.end(),
                   [&](int32_t a, int32_t b) { return tokens_[a].size() > tokens_[b].size(); });
  eog_.assign(n, 0);
  const auto mark = [&](int32_t id) {
    if (id >= 0 && id < n && !eog_[id]) {
      eog_[id] = 1;
      eog_ids_.push_back(id);
    }
  };
  mark(eos_id_);
  mark(optional_id(file, "tokenizer.ggml.eot_token_id", -1, n));
  mark(optional_id(file, "tokenizer.ggml.eom_token_id", -1, n));
  // The end-of-turn tokens of the chat formats, by their text, as llama.cpp finds them.
  for (const char* t : {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>",
                        "_<EOT>", "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>"})
    mark(find(t));
}

std::vector<Tokenizer::Fragment> Tokenizer::partition(std::string_view text, bool parse_special) const {
  std::vector<Fragment> frags = {{text}};
  // Longest special text first, so that a token is never cut by a shorter one it contains.
  for (int32_t id : special_) {
    if (!parse_special && kinds_[id] != TokenKind::kUserDefined) continue;
    const std::string& t = tokens_[id];
    std::vector<Fragment> next;
    for (const Fragment& f : frags) {
      if (f.token >= 0) {
        next.push_back(f);
        continue;
      }
      size_t pos = 0;
      for (size_t at; (at = f.text.find(t, pos)) != std::string_view::npos; pos = at + t.size()) {
        if (at > pos) next.push_back({f.text.substr(pos, at - pos)});
        next.push_back({{}, id});
      }
      if (pos < f.text.size()) next.push_back({f.text.substr(pos)});
    }
    frags.swap(next);
  }
  return frags;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int32_t> out;
  if (add_special && add_bos_) out.push_back(bos_id_);
  // SentencePiece's dummy prefix goes before the first piece of text and each piece after a
  // special token, as llama.cpp adds it.
  bool after_special = true;
  for (const Fragment& f : text.empty() ? std::vector<Fragment>{} : partition(text, parse_special)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      after_special = true;
    } else if (model_ == Model::kSpm) {
      encode_spm(f.text, add_space_prefix_ && after_special, out);
      after_special = false;
    } else {
      encode_bpe(f.text, out);
    }
  }
  if (add_special && add_eos_) out.push_back(eos_id_);
  return out;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  const std::string& t = tokens_[id];
  switch (kinds_[id]) {
    case TokenKind::kControl:
    case TokenKind::kUnused:
      return {};
    case TokenKind::kUnknown:
      return "\xE2\x96\x85";  // U+2585, as SentencePiece shows an unknown piece
    case TokenKind::kByte:
      // "<0xHH>": the byte itself; a byte token whose text is not that (a malformed file) is
      // shown as its text, not parsed into an exception.
      if (model_ == Model::kSpm && t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
          std::isxdigit(static_cast<unsigned char>(t[3])) && std::isxdigit(static_cast<unsigned char>(t[4])))
        return std::string(1, static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
      [[fallthrough]];
    default:
      break;
  }
  if (model_ == Model::kSpm) {
    // "▁" (U+2581) stands for a space.
    std::string out;
    out.reserve(t.size());
    for (size_t i = 0; i < t.size();) {
      if (t.compare(i, 3, "\xE2\x96\x81") == 0) {
        out += ' ';
        i += 3;
      } else {
        out += t[i++];
      }
    }
    return out;
  }
  return kinds_[id] == TokenKind::kUserDefined ? t : bpe_token_bytes(t);
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  IncrementalDecoder d(*this, {});
  std::string out;
  for (int32_t id : ids) out += d.push(id);
  out += d.flush();
  return out;
}

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, const std::vector<int32_t>& context, bool special)
    : tokenizer_(tokenizer), at_start_(true), special_(special) {
  for (int32_t id : context) {
    if (!tokenizer_.token_bytes(id).empty()) {
      at_start_ = false;
      break;
    }
  }
}

std::string IncrementalDecoder::push(int32_t id) {
  std::string bytes = tokenizer_.token_bytes(id);
  if (bytes.empty() && special_ && tokenizer_.token_kind(id) == TokenKind::kControl) {
    const std::vector<int32_t>& eog = tokenizer_.end_of_generation_ids();
    if (std::find(eog.begin(), eog.end(), id) == eog.end()) bytes = tokenizer_.token_text(id);
  }
  if (bytes.empty()) return {};
  if (at_start_ && tokenizer_.strips_first_space() && bytes[0] == ' ') bytes.erase(0, 1);
  at_start_ = false;
  pending_ += bytes;
  return utf8_take_complete(pending_, false);
}

std::string IncrementalDecoder::flush() { return utf8_take_complete(pending_, true); }

}  // namespace kvserve
