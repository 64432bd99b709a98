// kvserve-tokenize: prints the token ids of a text, space-separated; or, with --split PRE, the
// pieces a pre-tokenizer cuts each of a JSON array of strings (stdin) into, as JSON (for the
// test that runs the same texts through Python's `regex` module).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "gguf/gguf.h"
#include "text/pre_tokenizer.h"
#include "text/tokenizer.h"

int main(int argc, char** argv) {
  CLI::App app{"Tokenize text with a GGUF model's vocabulary"};
  std::string model, text, split;
  bool no_bos = false, no_special = false;
  app.add_option("--model", model, "GGUF file");
  app.add_option("text", text, "text to tokenize");
  app.add_flag("--no-bos", no_bos, "leave out BOS (and EOS where the vocabulary adds one)");
  app.add_flag("--no-special", no_special, "read control-token text (<|im_start|>, ...) as plain text");
  app.add_option("--split", split, "print the pieces pre-tokenizer PRE cuts stdin's JSON array of strings into");
  CLI11_PARSE(app, argc, argv);
  try {
    if (!split.empty()) {
      const kvserve::PreTokenizer pre(split);
      nlohmann::json out = nlohmann::json::array();
      for (const nlohmann::json& s : nlohmann::json::parse(std::cin)) {
        nlohmann::json pieces = nlohmann::json::array();
        const std::string str = s.get<std::string>();
        for (std::string_view p : pre.split(str)) pieces.push_back(std::string(p));
        out.push_back(pieces);
      }
      std::printf("%s\n", out.dump().c_str());
      return 0;
    }
    if (model.empty()) throw std::invalid_argument("--model is required");
    kvserve::GgufFile file(model);
    kvserve::Tokenizer tok(file);
    auto ids = tok.encode(text, !no_bos, !no_special);
    for (size_t i = 0; i < ids.size(); ++i) std::printf("%s%d", i ? " " : "", ids[i]);
    std::printf("\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvserve-tokenize: %s\n", e.what());
    return 1;
  }
  return 0;
}
