// What every front end does with a request before the engine sees it: the prompt (text or token
// ids, exactly one; text must be UTF-8 and is tokenized with BOS as the vocabulary says) and
// the call's deadline.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/service_status.h"
#include "text/tokenizer.h"

namespace kvserve {

// text: the prompt text ("" = not given); ids: the prompt token ids (empty = not given).
ServiceStatus resolve_prompt(const std::string& text, std::span<const int32_t> ids, const Tokenizer& tokenizer,
                             std::vector<int32_t>* out);

// Request::deadline_ms for a call that must end by `deadline` (time_point::max(): none, 0);
// at least 1 ms, so a deadline already past still ends the request at the next step.
int64_t deadline_ms_until(std::chrono::system_clock::time_point deadline);

// The prompt of an inspection call: text or ids (exactly one), 2..max_tokens tokens
// (server.inspect_max_tokens), into *out.
ServiceStatus inspection_prompt(const Tokenizer& tokenizer, int32_t max_tokens, const std::string& text,
                                std::span<const int32_t> ids, std::vector<int32_t>* out);

}  // namespace kvserve
