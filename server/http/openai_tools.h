// OpenAI's tool fields on a chat request (tools, tool_choice, parallel_tool_calls), checked and
// turned into what the template renders, how the answer is parsed, and, for tool_choice
// "required" or a named function, the constraint that makes the answer a valid call.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "common/request.h"
#include "core/service_status.h"
#include "text/tool_format.h"

namespace kvserve {

struct ToolRequest {
  enum class Choice { kNone, kAuto, kRequired, kNamed };
  nlohmann::ordered_json tools;  // the declared tools, or null
  Choice choice = Choice::kAuto;
  std::string named;             // kNamed: the function's name
  bool parallel = true;          // parallel_tool_calls: more than one call per answer
  bool declared() const { return tools.is_array() && !tools.empty(); }
  // Whether the answer may call a tool (and so is parsed for calls).
  bool calls_possible() const { return declared() && choice != Choice::kNone; }
};

// tools: [{"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}}]
// (names as OpenAI allows them: 1-64 of a-z, A-Z, 0-9, _ and -); tool_choice: "none", "auto",
// "required" or {"type": "function", "function": {"name"}} naming a declared tool;
// parallel_tool_calls: a boolean. Errors name the field ("tools[1].function.name: ...").
ServiceStatus parse_tool_fields(const nlohmann::ordered_json& body, ToolRequest* out);

// For "required" or a named tool: the constraint for a call (or calls) in the model's format,
// with arguments valid for the tool's parameters schema (control-token markers are written by
// requests with special_text, whose grammars see those tokens' spelling). For "auto" in a format
// whose calls open with a text marker (<tool_call>): free text, and once the marker is written,
// valid calls. Kind kNone otherwise.
ServiceStatus tool_choice_constraint(const ToolRequest& t, ToolFormat format, OutputConstraint* out);

}  // namespace kvserve
