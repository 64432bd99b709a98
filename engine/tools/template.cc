// kvserve-template: renders a chat template for a conversation given as JSON on stdin
// ({"messages": [...], "add_generation_prompt": true}): the template of --model (its
// tokenizer.chat_template, or ChatML), or --template FILE with --bos/--eos texts. Prints the
// prompt, or the template's error on stderr with exit 3. --now fixes strftime_now (UTC seconds).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "gguf/gguf.h"
#include "text/chat_template.h"
#include "text/jinja/jinja.h"

int main(int argc, char** argv) {
  CLI::App app{"Render a chat template for a conversation (JSON on stdin)"};
  std::string model, template_file, bos, eos;
  int64_t now = -1;
  app.add_option("--model", model, "GGUF file whose template (and BOS/EOS) to use");
  app.add_option("--template", template_file, "a Jinja template file instead");
  app.add_option("--bos", bos, "bos_token text for --template");
  app.add_option("--eos", eos, "eos_token text for --template");
  app.add_option("--now", now, "what strftime_now formats, in seconds since 1970 UTC (default: now)");
  CLI11_PARSE(app, argc, argv);
  try {
    const nlohmann::json in = nlohmann::json::parse(std::cin);
    const bool gen = in.value("add_generation_prompt", true);
    if (!model.empty()) {
      kvserve::GgufFile file(model);
      kvserve::Tokenizer tok(file);
      kvserve::ChatTemplate t(file, tok, template_file);
      std::fputs(t.render(in.at("messages"), gen).c_str(), stdout);
      return 0;
    }
    std::ifstream f(template_file, std::ios::binary);
    if (!f) throw std::runtime_error("cannot read " + template_file);
    std::stringstream ss;
    ss << f.rdbuf();
    nlohmann::json ctx = {{"messages", in.at("messages")}, {"add_generation_prompt", gen}, {"tools", nullptr},
                          {"documents", nullptr}};
    if (app.count("--bos")) ctx["bos_token"] = bos;
    if (app.count("--eos")) ctx["eos_token"] = eos;
    const kvserve::jinja::Template t(ss.str());
    std::fputs(t.render(kvserve::jinja::Value::from_json(ctx), now >= 0 ? now : std::time(nullptr)).c_str(), stdout);
  } catch (const kvserve::jinja::JinjaError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvserve-template: %s\n", e.what());
    return 1;
  }
  return 0;
}
