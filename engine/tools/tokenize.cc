// kvserve-tokenize: prints the token ids of a text, space-separated.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "gguf/gguf.h"
#include "text/tokenizer.h"

int main(int argc, char** argv) {
  CLI::App app{"Tokenize text with a GGUF model's vocabulary"};
  std::string model, text;
  bool no_bos = false;
  app.add_option("--model", model, "GGUF file")->required();
  app.add_option("text", text, "text to tokenize")->required();
  app.add_flag("--no-bos", no_bos, "leave out BOS");
  CLI11_PARSE(app, argc, argv);
  try {
    kvserve::GgufFile file(model);
    kvserve::Tokenizer tok(file);
    auto ids = tok.encode(text, !no_bos);
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
    std::printf("\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvserve-tokenize: %s\n", e.what());
    return 1;
  }
  return 0;
}
