// A model's chat template: its GGUF's tokenizer.chat_template, or a file that overrides it
// (model.chat_template_file), or ChatML where the model has neither; rendered by the Jinja
// interpreter with the vocabulary's own BOS and EOS texts, as transformers' apply_chat_template
// renders it (documents none, strftime_now the current UTC time, tools and template kwargs as
// the request gives them). At load it is probed once for what it makes of a tool-call turn and
// for the tool-call and reasoning formats it implies.
#pragma once

#include <nlohmann/json.hpp>

#include <ctime>
#include <memory>
#include <string>

#include "text/jinja/jinja.h"
#include "text/tokenizer.h"
#include "text/tool_format.h"

namespace kvserve {

class GgufFile;

// What a chat request gives the template, in the client's key order (templates write tool
// schemas with tojson, which keeps it).
struct ChatTurns {
  // [{"role", "content", "tool_calls"?, "tool_call_id"?, "reasoning_content"?}, ...] as OpenAI's
  // clients send them (content a string, null, or [{"type": "text", ...}]).
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools;   // OpenAI's tools array, or null
  bool add_generation_prompt = true;
  // More names for the template (vLLM's chat_template_kwargs: {"enable_thinking": false}), an
  // object or null; they cannot replace the names above.
  nlohmann::ordered_json kwargs;
  std::time_t now = 0;            // strftime_now's time; 0 = the current time
};

// How the template wants an assistant turn with tool calls (templates disagree; OpenAI's
// clients send content null and arguments as a JSON string).
struct ToolCallTurnForm {
  bool content_empty = false;     // content "" instead of null
  bool arguments_object = false;  // arguments parsed into an object instead of the string
};

class ChatTemplate {
 public:
  // override_file: a Jinja file to use instead of the model's ("" = none). Throws ConfigError
  // naming model.chat_template_file, or GgufError, when the template cannot be read or parsed.
  ChatTemplate(const GgufFile& file, const Tokenizer& tokenizer, const std::string& override_file);
  // From the template's text itself (tools and tests); origin says where it came from.
  ChatTemplate(const std::string& source, std::string bos, std::string eos, std::string origin);

  // jinja::JinjaError with the template's own message when it refuses the conversation.
  std::string render(const ChatTurns& turns) const;
  // The same for a conversation without tools (messages in any key order).
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& kwargs = nullptr) const;

  // Where the template came from: "the model file", the override's path, or "ChatML (default)".
  const std::string& origin() const { return origin_; }
  // Why the model's own template cannot be rendered ("" when it can).
  const std::string& error() const { return error_; }
  // The reasoning block the template writes (<think>, [THINK]; none for harmony, whose analysis
  // channel is the format's): answers are split into reasoning and content.
  const ReasoningMarkers& reasoning() const { return reasoning_; }
  bool thinks() const { return !reasoning_.open.empty() || tool_format_ == ToolFormat::kHarmony; }
  // How the model writes tool calls, as the template implies.
  ToolFormat tool_format() const { return tool_format_; }
  const ToolCallTurnForm& tool_call_turn_form() const { return form_; }

 private:
  void init(const std::string& source);
  nlohmann::ordered_json adapted(const nlohmann::ordered_json& messages, const ToolCallTurnForm& form) const;
  std::string render_with(const ChatTurns& turns, const ToolCallTurnForm& form) const;
  void probe_tool_call_turn();

  std::string bos_, eos_, origin_, error_;
  ReasoningMarkers reasoning_;
  ToolFormat tool_format_ = ToolFormat::kGeneric;
  ToolCallTurnForm form_;
  std::unique_ptr<jinja::Template> template_;
};

}  // namespace kvserve
