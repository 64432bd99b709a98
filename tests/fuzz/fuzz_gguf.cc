// libFuzzer target: arbitrary bytes as a GGUF file. The reader (and the tokenizer built from its
// metadata) must either load it or throw GgufError; never crash or read out of bounds.
#include <unistd.h>

#include <cstdio>
#include <string>

#include "gguf/gguf.h"
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
    if (file.has("tokenizer.ggml.model")) {
      kvserve::Tokenizer tok(file);
      tok.decode(tok.encode("Hello, wörld! 123", true));
    }
  } catch (const kvserve::GgufError&) {
  } catch (const std::invalid_argument&) {  // std::stoi on a malformed <0xNN> byte piece
  }
  return 0;
}
