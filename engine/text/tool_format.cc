#include "text/tool_format.h"

namespace kvserve {
namespace {

bool has(std::string_view s, std::string_view marker) { return s.find(marker) != std::string_view::npos; }

}  // namespace

ToolFormat detect_tool_format(std::string_view t) {
  // The most specific markers first: Qwen3.5's XML calls sit inside <tool_call> too.
  if (has(t, "<|channel|>")) return ToolFormat::kHarmony;
  if (has(t, "tool\xE2\x96\x81" "call\xE2\x96\x81" "begin")) return ToolFormat::kDeepSeek;  // tool▁call▁begin
  if (has(t, "<function=") && has(t, "<parameter=")) return ToolFormat::kQwenXml;
  if (has(t, "[TOOL_CALLS]")) return ToolFormat::kMistral;
  if (has(t, "<tool_call>")) return ToolFormat::kHermes;
  if (has(t, "<|start_header_id|>") && (has(t, "<|python_tag|>") || has(t, "ipython"))) return ToolFormat::kLlama3;
  return ToolFormat::kGeneric;
}

const char* tool_format_name(ToolFormat f) {
  switch (f) {
    case ToolFormat::kGeneric: return "generic-json";
    case ToolFormat::kHermes: return "hermes";
    case ToolFormat::kQwenXml: return "qwen-xml";
    case ToolFormat::kLlama3: return "llama3-json";
    case ToolFormat::kMistral: return "mistral";
    case ToolFormat::kHarmony: return "gpt-oss-harmony";
    case ToolFormat::kDeepSeek: return "deepseek";
  }
  return "?";
}

ReasoningMarkers detect_reasoning_markers(std::string_view t) {
  if (has(t, "<|channel|>")) return {};  // harmony's channels carry it
  if (has(t, "<think>")) return {"<think>", "</think>"};
  if (has(t, "[THINK]")) return {"[THINK]", "[/THINK]"};
  return {};
}

}  // namespace kvserve
