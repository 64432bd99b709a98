#include "http/openai_tools.h"

#include <algorithm>

#include "core/json_body.h"

namespace kvserve {
namespace {

using ordered = nlohmann::ordered_json;

ServiceStatus invalid(const std::string& message) { return {ServiceCode::kInvalidArgument, message}; }

bool valid_name(const std::string& n) {
  return !n.empty() && n.size() <= 64 && std::all_of(n.begin(), n.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
  });
}

std::string brief(const ordered& j) { return json_brief(nlohmann::json::parse(j.dump())); }

// One call's open and close text around its arguments, in the format's own spelling.
struct CallText {
  std::string open, close;
  bool json_arguments = true;
};

CallText call_text(ToolFormat f, const std::string& name) {
  switch (f) {
    case ToolFormat::kHermes:
      return {"<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": ", "}\n</tool_call>"};
    case ToolFormat::kQwenXml:
      return {"<tool_call>\n<function=" + name + ">\n", "</function>\n</tool_call>", false};
    case ToolFormat::kLlama3:
      return {"{\"name\": \"" + name + "\", \"parameters\": ", "}"};
    case ToolFormat::kMistral:
      return {"[TOOL_CALLS]" + name + "[ARGS]", ""};
    case ToolFormat::kHarmony:
      return {"<|channel|>commentary to=functions." + name + " <|constrain|>json<|message|>", ""};
    case ToolFormat::kDeepSeek:
      return {"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>" + name + "<｜tool▁sep｜>", "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"};
    default:
      return {"{\"tool_call\": {\"name\": \"" + name + "\", \"arguments\": ", "}}"};
  }
}

}  // namespace

ServiceStatus parse_tool_fields(const ordered& body, ToolRequest* out) {
  if (auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) return invalid("tools: expected an array of tools");
    if (it->size() > 512) return invalid("tools: at most 512 tools");
    for (size_t i = 0; i < it->size(); ++i) {
      const ordered& t = (*it)[i];
      const std::string at = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) return invalid(at + ": expected an object");
      if (t.value("type", "") != "function")
        return invalid(at + ".type: only \"function\" tools are served, got " + brief(t.contains("type") ? t["type"] : ordered()));
      if (!t.contains("function") || !t["function"].is_object()) return invalid(at + ".function: required, an object");
      const ordered& fn = t["function"];
      if (!fn.contains("name") || !fn["name"].is_string() || !valid_name(fn["name"].get<std::string>()))
        return invalid(at + ".function.name: required, 1 to 64 letters, digits, '_' or '-'");
      if (fn.contains("parameters") && !fn["parameters"].is_null() && !fn["parameters"].is_object())
        return invalid(at + ".function.parameters: expected a JSON Schema object");
      if (fn.contains("description") && !fn["description"].is_null() && !fn["description"].is_string())
        return invalid(at + ".function.description: expected a string");
      for (size_t j = 0; j < i; ++j)
        if ((*it)[j]["function"]["name"] == fn["name"])
          return invalid(at + ".function.name: " + brief(fn["name"]) + " is declared twice");
    }
    if (!it->empty()) out->tools = *it;
  }
  if (auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      const std::string c = it->get<std::string>();
      if (c == "none") out->choice = ToolRequest::Choice::kNone;
      else if (c == "auto") out->choice = ToolRequest::Choice::kAuto;
      else if (c == "required") out->choice = ToolRequest::Choice::kRequired;
      else return invalid("tool_choice: expected \"none\", \"auto\", \"required\" or a function, got " + brief(*it));
    } else if (it->is_object() && it->value("type", "") == "function" && it->contains("function") &&
               (*it)["function"].is_object() && (*it)["function"].contains("name") &&
               (*it)["function"]["name"].is_string()) {
      out->choice = ToolRequest::Choice::kNamed;
      out->named = (*it)["function"]["name"].get<std::string>();
    } else {
      return invalid("tool_choice: expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}");
    }
    if (out->choice != ToolRequest::Choice::kNone && out->choice != ToolRequest::Choice::kAuto && !out->declared())
      return invalid("tool_choice: " + brief(*it) + " needs tools");
    if (out->choice == ToolRequest::Choice::kNamed) {
      const bool found = std::any_of(out->tools.begin(), out->tools.end(),
                                     [&](const ordered& t) { return t["function"]["name"] == out->named; });
      if (!found) return invalid("tool_choice.function.name: " + brief(ordered(out->named)) + " is not among the tools");
    }
  }
  if (auto it = body.find("parallel_tool_calls"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return invalid("parallel_tool_calls: expected true or false");
    out->parallel = it->get<bool>();
  }
  return {};
}

ServiceStatus tool_choice_constraint(const ToolRequest& t, ToolFormat format, OutputConstraint* out) {
  *out = {};
  const bool lazy = t.choice == ToolRequest::Choice::kAuto && t.declared() &&
                    (format == ToolFormat::kHermes || format == ToolFormat::kQwenXml);
  if (t.choice != ToolRequest::Choice::kRequired && t.choice != ToolRequest::Choice::kNamed && !lazy) return {};
  // Formats whose every call opens with its marker take several; the others one.
  const bool several = format == ToolFormat::kHermes || format == ToolFormat::kQwenXml || format == ToolFormat::kMistral;
  ordered spec = {{"calls", ordered::array()},
                  {"max", t.parallel && several ? -1 : 1},
                  {"separator", format == ToolFormat::kMistral ? "" : "\n"}};
  // gpt-oss thinks in its analysis channel before it calls.
  if (format == ToolFormat::kHarmony)
    spec["optional_prefix"] = {{"open", "<|channel|>analysis<|message|>"}, {"close", "<|end|><|start|>assistant"}};
  for (const ordered& tool : t.tools) {
    const ordered& fn = tool["function"];
    const std::string name = fn["name"].get<std::string>();
    if (t.choice == ToolRequest::Choice::kNamed && name != t.named) continue;
    const CallText text = call_text(format, name);
    ordered call = {{"name", name}, {"open", text.open}, {"close", text.close}};
    if (text.json_arguments)
      call["schema"] = fn.contains("parameters") && fn["parameters"].is_object() ? fn["parameters"]
                                                                                : ordered{{"type", "object"}};
    spec["calls"].push_back(std::move(call));
  }
  if (lazy) spec["lazy_marker"] = "<tool_call>";
  out->kind = OutputConstraint::Kind::kToolCalls;
  out->text = spec.dump();
  return {};
}

}  // namespace kvserve
