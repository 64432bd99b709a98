// libFuzzer target: arbitrary bytes as a GGUF file. The reader, the hyperparameters, the
// tokenizer built from its metadata (every token's bytes) and the chat template it carries must
// either load or throw GgufError (a template: JinjaError when rendered); never crash, read out
// of bounds or allocate far beyond the file.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gguf/gguf.h"
#include "model/decoder_hparams.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/kvserve-fuzz-gguf-" + std::to_string(getpid()) + ".gguf";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    kvserve::GgufFile file(path);
    for (const auto& t : file.tensors()) {
      const auto* p = static_cast<const uint8_t*>(file.tensor_data(t));
      volatile uint8_t last = t.n_bytes() ? p[t.n_bytes() - 1] : 0;  // must be inside the mapping
      (void)last;
    }
    // The hyperparameters are checked against the tensors before anything is sized by them.
    if (file.has("general.architecture")) (void)kvserve::DecoderHparams::from_gguf(file);
    if (file.has("tokenizer.ggml.model")) {
      kvserve::Tokenizer tok(file);
      tok.decode(tok.encode("Hello, wörld! 123", true));
      for (int32_t id = 0; id < tok.vocab_size(); ++id) (void)tok.token_bytes(id);  // <0xZZ> and the like
      // The template inside the file: parsed and rendered, or refused, never a crash.
      kvserve::ChatTemplate chat(file, tok, "");
      try {
        (void)chat.render(nlohmann::json::parse(R"([{"role":"user","content":"Hi é"}])"), true);
      } catch (const kvserve::jinja::JinjaError&) {
      }
    }
  } catch (const kvserve::GgufError&) {
  }
  return 0;
}
