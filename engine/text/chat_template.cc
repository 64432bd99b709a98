#include "text/chat_template.h"

#include <ctime>
#include <fstream>
#include <sstream>

#include "gguf/gguf.h"
#include "common/config_error.h"

namespace kvserve {
namespace {

// ChatML, the format most instruct models without a template of their own were tuned on, with
// tools as Hermes-style models take them: their schemas in the system turn, calls in
// <tool_call> tags, results in <tool_response> tags.
constexpr const char* kChatMl = R"JINJA({%- if tools -%}
{{- '<|im_start|>system\n' -}}
{%- if messages and messages[0].role == 'system' -%}{{- messages[0].content + '\n\n' -}}{%- endif -%}
{{- 'You can call these tools, each given by its JSON schema:\n<tools>' -}}
{%- for tool in tools -%}{{- '\n' + (tool.function if tool.function is defined else tool) | tojson -}}{%- endfor -%}
{{- '\n</tools>\n\nTo call a tool, write a JSON object with its "name" and "arguments" between <tool_call> and </tool_call>, one call per pair of tags.<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' and tools and loop.first -%}
{%- elif message.role == 'assistant' and message.tool_calls -%}
{{- '<|im_start|>assistant\n' -}}
{%- if message.content -%}{{- message.content + '\n' -}}{%- endif -%}
{%- for tc in message.tool_calls -%}
{%- set fn = tc.function if tc.function is defined else tc -%}
{%- set args = fn.arguments if fn.arguments is string else fn.arguments | tojson -%}
{{- '<tool_call>\n{"name": ' + fn.name | tojson + ', "arguments": ' + args + '}\n</tool_call>' -}}
{%- if not loop.last -%}{{- '\n' -}}{%- endif -%}
{%- endfor -%}
{{- '<|im_end|>\n' -}}
{%- elif message.role == 'tool' -%}
{{- '<|im_start|>tool\n<tool_response>\n' + (message.content if message.content is string else '') + '\n</tool_response><|im_end|>\n' -}}
{%- else -%}
{{- '<|im_start|>' + message.role + '\n' + (message.content if message.content is string else '') + '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\n' -}}{%- endif -%})JINJA";

// OpenAI's content parts ([{"type": "text", "text": ...}]) joined into the string templates expect.
nlohmann::ordered_json flatten(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
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

// A conversation whose last turn calls a tool, with markers no template writes by itself: what
// the template makes of it shows which form of the turn it wants.
ChatTurns probe_turns() {
  using ordered = nlohmann::ordered_json;
  ChatTurns t;
  t.messages = ordered::parse(R"([{"role": "user", "content": "kvs-probe-question"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "123456789", "type": "function",
     "function": {"name": "kvs_probe_tool", "arguments": "{\"kvs_probe_arg\": \"kvs-probe-value\"}"}}]}])");
  t.tools = ordered::parse(R"([{"type": "function", "function": {"name": "kvs_probe_tool", "description": "A probe.",
    "parameters": {"type": "object", "properties": {"kvs_probe_arg": {"type": "string"}}, "required": ["kvs_probe_arg"]}}}])");
  t.add_generation_prompt = false;
  t.now = 1;
  return t;
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
  try {
    init(source);
  } catch (const jinja::JinjaError& e) {
    // A file given on purpose must work; the model's own template failing leaves completions
    // served and chat refused with the reason.
    if (!override_file.empty()) throw ConfigError("model.chat_template_file: " + std::string(e.what()));
    error_ = "the model's chat template cannot be used here (" + std::string(e.what()) +
             "); give one in model.chat_template_file";
  }
}

ChatTemplate::ChatTemplate(const std::string& source, std::string bos, std::string eos, std::string origin)
    : bos_(std::move(bos)), eos_(std::move(eos)), origin_(std::move(origin)) {
  init(source.empty() ? std::string(kChatMl) : source);
}

void ChatTemplate::init(const std::string& source) {
  reasoning_ = detect_reasoning_markers(source);
  tool_format_ = detect_tool_format(source);
  template_ = std::make_unique<jinja::Template>(source);
  probe_tool_call_turn();
}

// The first form, in the order (null, string), (null, object), ("", string), ("", object), that
// renders without an error, without a null printed as None, without the arguments printed as a
// Python dict or encoded twice, and with the arguments' value in it (a template that writes no
// tool calls at all is judged without that); the form as sent when none does.
void ChatTemplate::probe_tool_call_turn() {
  const ChatTurns probe = probe_turns();
  for (bool need_value : {true, false})
    for (int i = 0; i < 4; ++i) {
      const ToolCallTurnForm form{i >= 2, (i & 1) != 0};
      try {
        const std::string out = render_with(probe, form);
        if (out.find("None") != std::string::npos || out.find("{'kvs_probe_arg'") != std::string::npos ||
            out.find("\\\"kvs_probe_arg") != std::string::npos ||
            (need_value && out.find("kvs-probe-value") == std::string::npos))
          continue;
        form_ = form;
        return;
      } catch (const std::exception&) {
        continue;
      }
    }
  form_ = {};
}

nlohmann::ordered_json ChatTemplate::adapted(const nlohmann::ordered_json& messages, const ToolCallTurnForm& form) const {
  nlohmann::ordered_json out = flatten(messages);
  if (!form.content_empty && !form.arguments_object) return out;
  for (auto& m : out) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array() || m["tool_calls"].empty()) continue;
    if (form.content_empty && (!m.contains("content") || m["content"].is_null())) m["content"] = "";
    if (!form.arguments_object) continue;
    for (auto& c : m["tool_calls"]) {
      if (!c.is_object() || !c.contains("function") || !c["function"].is_object()) continue;
      auto& fn = c["function"];
      if (!fn.contains("arguments") || !fn["arguments"].is_string()) continue;
      auto parsed = nlohmann::ordered_json::parse(fn["arguments"].get<std::string>(), nullptr, false);
      if (!parsed.is_discarded()) fn["arguments"] = std::move(parsed);
    }
  }
  return out;
}

std::string ChatTemplate::render_with(const ChatTurns& turns, const ToolCallTurnForm& form) const {
  if (!template_) throw jinja::JinjaError(error_);
  nlohmann::ordered_json ctx = {{"tools", turns.tools}, {"documents", nullptr}};
  if (turns.kwargs.is_object())
    for (auto it = turns.kwargs.begin(); it != turns.kwargs.end(); ++it)
      if (it.key() != "tools") ctx[it.key()] = it.value();
  ctx["messages"] = adapted(turns.messages, form);
  ctx["add_generation_prompt"] = turns.add_generation_prompt;
  if (!bos_.empty()) ctx["bos_token"] = bos_;
  if (!eos_.empty()) ctx["eos_token"] = eos_;
  return template_->render(jinja::Value::from_json(ctx), turns.now != 0 ? turns.now : std::time(nullptr));
}

std::string ChatTemplate::render(const ChatTurns& turns) const { return render_with(turns, form_); }

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& kwargs) const {
  ChatTurns t;
  t.messages = messages;
  t.add_generation_prompt = add_generation_prompt;
  if (kwargs.is_object()) t.kwargs = kwargs;
  return render(t);
}

}  // namespace kvserve
