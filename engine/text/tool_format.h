// How a model writes tool calls, as its chat template implies: the markers around a call and
// the form of its arguments. Detected once per template from the template's own text (the
// markers it writes for an assistant turn with tool calls), as llama.cpp's chat-format
// detection does; a template that names none gets the generic JSON form.
#pragma once

#include <string>
#include <string_view>

namespace kvserve {

enum class ToolFormat {
  kGeneric,      // the whole answer a JSON object: {"tool_calls": [{"name", "arguments"}]} or {"response": "..."}
  kHermes,       // <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Hermes, Qwen2.5, Qwen3, Granite)
  kQwenXml,      // <tool_call><function=NAME><parameter=KEY>VALUE</parameter></function></tool_call> (Qwen3-Coder, Qwen3.5)
  kLlama3,       // {"name": ..., "parameters": {...}} as the whole answer, or <|python_tag|>NAME.call(k=v)
  kMistral,      // [TOOL_CALLS]NAME[CALL_ID]ID[ARGS]{...}, [TOOL_CALLS]NAME[ARGS]{...}, [TOOL_CALLS][{...}]
  kHarmony,      // gpt-oss: <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}
  kDeepSeek,     // <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜> (V3.1), or R1's function<｜tool▁sep｜>NAME ```json ...```
};

// The format a template's text implies.
ToolFormat detect_tool_format(std::string_view template_source);
// Its name for logs and /v1/models ("hermes", "qwen-xml", ...).
const char* tool_format_name(ToolFormat f);

// Where the answer's reasoning is: none, a block between two markers (<think>...</think>,
// [THINK]...[/THINK]), or gpt-oss's analysis channel (kHarmony).
struct ReasoningMarkers {
  std::string open, close;  // empty: the template writes no reasoning block
};
ReasoningMarkers detect_reasoning_markers(std::string_view template_source);

}  // namespace kvserve
