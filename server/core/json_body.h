// Client JSON in and JSON out without a way to end the process. In: a body is parsed by a SAX
// pass that knows where it is, so every refusal names the field ("temperature: the number
// 1e999 is out of range", "messages[0].content: not valid UTF-8") and nesting deeper than
// kMaxJsonDepth is refused before anything walks the tree recursively. Out: text that carries
// model or client bytes is serialised with malformed UTF-8 replaced by U+FFFD, never thrown on.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "core/service_status.h"

namespace kvserve {

// Deep enough for any request (a JSON schema of tools included), shallow enough that every
// recursive walk over a body (copying, rendering, the template's values) stays far from the
// stack's end.
constexpr int kMaxJsonDepth = 128;

// Parses a request body; on failure an INVALID_ARGUMENT whose message starts with the path of
// the offending value ("body" when it is the document itself).
ServiceStatus parse_json_body(std::string_view text, nlohmann::json* out);

// j serialised on one line; invalid UTF-8 in any string becomes U+FFFD instead of an exception.
std::string json_text(const nlohmann::json& j);

// A value quoted in an error message: JSON, cut to about max_bytes ("..." marks a cut).
std::string json_brief(const nlohmann::json& j, size_t max_bytes = 80);

// Text with malformed UTF-8 replaced by U+FFFD, for model bytes that go into a JSON string.
std::string valid_utf8(std::string_view bytes);

}  // namespace kvserve
