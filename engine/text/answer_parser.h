// A chat answer taken apart as it streams: its reasoning (a <think> block, Mistral's [THINK],
// gpt-oss's analysis channel), its content, and the tool calls it makes in its template's format
// (text/tool_format.h). What comes back as reasoning_content, content and tool_calls; the same
// parts whether the answer arrives whole or a byte at a time.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "text/reasoning.h"
#include "text/tool_format.h"

namespace kvserve {

struct ToolCall {
  std::string id;         // the id the answer carries (Mistral), else "" (the server makes one)
  std::string name;
  std::string arguments;  // a JSON object's text
};

struct ParsedAnswer {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
};

// What a request's answer looks like.
struct AnswerFormat {
  ToolFormat tools = ToolFormat::kGeneric;
  bool parse_tools = false;        // the request declared tools (and did not say tool_choice none)
  ReasoningMarkers reasoning;      // no open marker: no reasoning block (harmony has channels instead)
  bool reasoning_open = false;     // the prompt opened the block: the answer starts inside it
  // The declared tools (OpenAI's [{"type": "function", "function": {...}}]): the XML form's
  // parameter values are typed by their schemas.
  nlohmann::ordered_json declared = nlohmann::ordered_json::array();
};

class AnswerParser {
 public:
  explicit AnswerParser(AnswerFormat format);
  // More of the answer; returns what is settled since the last call: reasoning and content to
  // append, and the calls now complete (text that may start a marker waits).
  ParsedAnswer push(std::string_view text);
  // The end of the answer: what was held back (an unfinished call becomes content).
  ParsedAnswer finish();

 private:
  void run(ParsedAnswer& out, bool final);
  void run_tools(std::string_view content, ParsedAnswer& out, bool final);
  void run_harmony(ParsedAnswer& out, bool final);
  void add_content(ParsedAnswer& out, std::string_view text);

  AnswerFormat format_;
  std::optional<ReasoningSplitter> split_;
  std::string held_;               // content not yet settled
  bool content_started_ = false;   // any content or call so far (a whole-answer call must come first)
  bool after_call_ = false;        // whitespace after a call is not content
  // Harmony: the message being read.
  enum class Channel { kNone, kReasoning, kContent, kCall, kSkip };
  Channel channel_ = Channel::kNone;
  std::string recipient_;
};

// The whole answer at once, reasoning and content without surrounding whitespace.
ParsedAnswer parse_answer(std::string_view answer, const AnswerFormat& format);

}  // namespace kvserve
