// libFuzzer target for the chat-template interpreter: the input is a template, rendered with a
// small conversation. Parsing and rendering may refuse (JinjaError) but must never crash, hang
// or read out of bounds; the output is bounded by a render of bounded loops, and nesting, macro
// recursion and the size of every value by the interpreter's limits.
#include <string>

#include "text/jinja/jinja.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kvserve::jinja::Value;
  static const Value context = Value::from_json(nlohmann::json{
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi <|x|> é"}}}},
      {"add_generation_prompt", true},
      {"bos_token", "<s>"},
      {"tools", nullptr}});
  if (size > 65536) return 0;  // room for nesting past the interpreter's bounds
  try {
    kvserve::jinja::Template t(std::string(reinterpret_cast<const char*>(data), size));
    (void)t.render(context, 1727222400);
  } catch (const kvserve::jinja::JinjaError&) {
  }
  return 0;
}
