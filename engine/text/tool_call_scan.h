// The tool calls of each format (text/tool_format.h) read from an answer's text: where a call
// may start, and the call (or calls) written from there. For text/answer_parser.cc.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "text/answer_parser.h"

namespace kvserve::tool_calls {

// A call's opening marker in s: its offset and length (npos when none). at_start: s begins the
// answer's content, where formats that write a bare JSON call may start one.
struct Marker {
  size_t pos = std::string_view::npos;
  size_t len = 0;
};
Marker find_start(ToolFormat f, std::string_view s, bool at_start);
// How many bytes at s's end may begin an opening marker (they wait for more text).
size_t partial_start(ToolFormat f, std::string_view s, bool at_start);

// What follows an opening marker at `pos`: the calls, complete (end: just past them), not yet
// complete (more text may finish them), or not a call after all (kBad: the marker is content).
struct Scan {
  enum Status { kOk, kIncomplete, kBad } status = kBad;
  size_t end = 0;
  std::vector<ToolCall> calls;
  std::string content;  // the generic format's {"response": "..."}: content, not a call
};
Scan scan(ToolFormat f, std::string_view s, size_t pos, bool final, const nlohmann::ordered_json& declared);

// Where the JSON value starting at s[pos] (after whitespace) ends: npos while it may still be
// completed; kBadJson when it cannot be JSON.
inline constexpr size_t kBadJson = std::string_view::npos - 1;
size_t json_end(std::string_view s, size_t pos);

// A call's arguments as compact JSON text with their key order kept: an object as it is, a
// string that holds JSON as that JSON.
std::string arguments_text(const nlohmann::ordered_json& args);

}  // namespace kvserve::tool_calls
