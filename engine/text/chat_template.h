// A model's chat template: its GGUF's tokenizer.chat_template, or a file that overrides it
// (model.chat_template_file), or ChatML where the model has neither; rendered by the Jinja
// interpreter with the vocabulary's own BOS and EOS texts, as transformers' apply_chat_template
// renders it (tools and documents none, strftime_now the current UTC time, template kwargs as
// the request gives them).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <string>

#include "text/jinja/jinja.h"
#include "text/tokenizer.h"

namespace kvserve {

class GgufFile;

class ChatTemplate {
 public:
  // override_file: a Jinja file to use instead of the model's ("" = none). Throws ConfigError
  // naming model.chat_template_file, or GgufError, when the template cannot be read or parsed.
  ChatTemplate(const GgufFile& file, const Tokenizer& tokenizer, const std::string& override_file);

  // messages: [{"role", "content"}, ...] (content a string or OpenAI's [{"type": "text", ...}]).
  // kwargs: more names for the template (vLLM's chat_template_kwargs: {"enable_thinking":
  // false} for Qwen3), an object or null; they cannot replace messages or add_generation_prompt.
  // jinja::JinjaError with the template's own message when it refuses the conversation.
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& kwargs = nullptr) const;

  // Where the template came from: "the model file", the override's path, or "ChatML (default)".
  const std::string& origin() const { return origin_; }
  // Why the model's own template cannot be rendered ("" when it can).
  const std::string& error() const { return error_; }
  // Whether the template writes <think> reasoning blocks (Qwen3, QwQ, DeepSeek-R1 and V3.1):
  // answers to it are split into reasoning and content (text/reasoning.h).
  bool thinks() const { return thinks_; }

 private:
  std::string bos_, eos_, origin_, error_;
  bool thinks_ = false;
  std::unique_ptr<jinja::Template> template_;
};

}  // namespace kvserve
