// Helpers of the tests of model answers: llama.cpp's tool-call format groups in our terms, a
// server-sent-events body's chunks, and whether a grammar admits a text.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "grammar/stacks.h"
#include "text/tool_format.h"

namespace kvserve::testing {

// The format of a group of ../shared/chat-templates/tool-call-parses.json.
inline ToolFormat format_of_group(const std::string& g) {
  if (g == "deepseek-r1" || g == "deepseek-v3.1") return ToolFormat::kDeepSeek;
  if (g == "gpt-oss-harmony") return ToolFormat::kHarmony;
  if (g == "llama3-json") return ToolFormat::kLlama3;
  if (g == "mistral") return ToolFormat::kMistral;
  if (g == "qwen3-coder-xml" || g == "qwen3.5") return ToolFormat::kQwenXml;
  return ToolFormat::kHermes;
}

// The "data: " chunks of an SSE body as JSON, up to "[DONE]".
inline std::vector<nlohmann::json> sse_chunks(const std::string& sse) {
  std::vector<nlohmann::json> out;
  for (size_t at = 0; (at = sse.find("data: ", at)) != std::string::npos;) {
    const size_t end = sse.find("\n\n", at);
    const std::string line = sse.substr(at + 6, end - at - 6);
    at = end;
    if (line == "[DONE]") break;
    out.push_back(nlohmann::json::parse(line));
  }
  return out;
}

// True when the grammar accepts s byte by byte and is complete at its end.
inline bool grammar_matches(const grammar::Grammar& g, const std::string& s) {
  grammar::StackPool pool(g);
  uint32_t st = pool.start();
  for (char c : s)
    if ((st = pool.step(st, static_cast<uint8_t>(c))) == grammar::StackPool::kDead) return false;
  return pool.complete(st);
}

}  // namespace kvserve::testing
