#include "text/chat_template.h"

#include <ctime>
#include <fstream>
#include <sstream>

#include "gguf/gguf.h"
#include "common/config_error.h"

namespace kvserve {
namespace {

// ChatML, the format most instruct models without a template of their own were tuned on.
constexpr const char* kChatMl =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// OpenAI's content parts ([{"type": "text", "text": ...}]) joined into the string templates expect.
nlohmann::json flatten(const nlohmann::json& messages) {
  nlohmann::json out = messages;
  for (auto& m : out) {
    if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
    std::string text;
    for (const auto& part : m["content"])
      if (part.is_object() && part.contains("type") && part["type"] == "text" && part.contains("text") &&
          part["text"].is_string())
        text += part["text"].get<std::string>();
    m["content"] = text;
  }
  return out;
}

}  // namespace

ChatTemplate::ChatTemplate(const GgufFile& file, const Tokenizer& tok, const std::string& override_file) {
  if (tok.bos_id() >= 0) bos_ = tok.token_text(tok.bos_id());
  if (tok.eos_id() >= 0) eos_ = tok.token_text(tok.eos_id());
  std::string source;
  if (!override_file.empty()) {
    std::ifstream in(override_file, std::ios::binary);
    if (!in) throw ConfigError("model.chat_template_file: cannot read " + override_file);
    std::stringstream ss;
    ss << in.rdbuf();
    source = ss.str();
    origin_ = override_file;
  } else if (const GgufValue* v = file.find("tokenizer.chat_template")) {
    source = v->as_string("tokenizer.chat_template");
    origin_ = "the model file (tokenizer.chat_template)";
  } else {
    source = kChatMl;
    origin_ = "ChatML (default: the model file has none)";
  }
  thinks_ = source.find("<think>") != std::string::npos;
  try {
    template_ = std::make_unique<jinja::Template>(source);
  } catch (const jinja::JinjaError& e) {
    // A file given on purpose must work; the model's own template failing leaves completions
    // served and chat refused with the reason.
    if (!override_file.empty()) throw ConfigError("model.chat_template_file: " + std::string(e.what()));
    error_ = "the model's chat template cannot be used here (" + std::string(e.what()) +
             "); give one in model.chat_template_file";
  }
}

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& kwargs) const {
  if (!template_) throw jinja::JinjaError(error_);
  nlohmann::json ctx = {{"tools", nullptr}, {"documents", nullptr}};
  if (kwargs.is_object())
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) ctx[it.key()] = it.value();
  ctx["messages"] = flatten(messages);
  ctx["add_generation_prompt"] = add_generation_prompt;
  if (!bos_.empty()) ctx["bos_token"] = bos_;
  if (!eos_.empty()) ctx["eos_token"] = eos_;
  return template_->render(jinja::Value::from_json(ctx), std::time(nullptr));
}

}  // namespace kvserve
