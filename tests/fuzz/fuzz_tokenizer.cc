// libFuzzer target for the tokenizers: the first byte picks a vocabulary (SentencePiece-style or
// GPT-2 byte-level), the rest is text to encode (round trip must hold for valid UTF-8) and also
// a stream of token ids for the incremental decoder (every chunk must be whole UTF-8).
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/synthetic.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

struct Vocabs {
  std::vector<std::unique_ptr<kvserve::GgufFile>> files;
  std::vector<std::unique_ptr<kvserve::Tokenizer>> toks;
};

Vocabs& vocabs() {
  static Vocabs v = [] {
    Vocabs out;
    std::vector<std::string> paths;
    for (const char* name : {"ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf"}) {
      const std::string p = std::string(KVSERVE_SHARED_DIR) + "/models/" + name;
      if (std::filesystem::exists(p)) paths.push_back(p);
    }
    if (paths.empty()) {  // no ../shared: a synthetic SentencePiece-style vocab
      const std::string p = "/tmp/kvserve-fuzz-vocab.gguf";
      kvserve::write_synthetic_model({.dim = 8, .layers = 1, .heads = 2, .kv_heads = 1, .ffn = 8, .vocab = 600}, p);
      paths.push_back(p);
    }
    for (const auto& p : paths) {
      out.files.push_back(std::make_unique<kvserve::GgufFile>(p));
      out.toks.push_back(std::make_unique<kvserve::Tokenizer>(*out.files.back()));
    }
    return out;
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Vocabs& v = vocabs();
  const kvserve::Tokenizer& tok = *v.toks[data[0] % v.toks.size()];
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);

  // Prompts parse control-token text ("</s>", "<|im_start|>") into those tokens, which decode
  // as nothing: only ids are checked there; the round trip is for text read as text.
  for (int32_t id : tok.encode(text, true, true))
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  const std::vector<int32_t> ids = tok.encode(text, true, false);
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) std::abort();
  // Round trip for valid UTF-8, except that SentencePiece cannot tell a literal "▁" from the
  // space it stands for (the reference tokenizers decode it as a space too).
  const bool spm_marker = tok.model() == kvserve::Tokenizer::Model::kSpm && text.find("\xE2\x96\x81") != std::string::npos;
  if (kvserve::utf8_is_valid(text) && !spm_marker && tok.decode(ids) != text) std::abort();

  // The same bytes read as token ids: streaming must never emit a broken character.
  kvserve::IncrementalDecoder dec(tok, {});
  for (size_t i = 1; i + 1 < size; i += 2) {
    const int32_t id = (data[i] | (data[i + 1] << 8)) % tok.vocab_size();
    if (!kvserve::utf8_is_valid(dec.push(id))) std::abort();
  }
  if (!kvserve::utf8_is_valid(dec.flush())) std::abort();
  return 0;
}
