// The checks every request passes before the engine accepts it. Pure logic, so the request
// fuzzer drives it directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/request.h"

namespace kvserve {

constexpr size_t kMaxStopStrings = 16;
constexpr size_t kMaxStopBytes = 256;
constexpr size_t kMaxStopTokens = 64;
constexpr int32_t kMaxTopLogprobs = 20;
// A constraint's text (schema, pattern, grammar) and choices: a request body's size, not more.
constexpr size_t kMaxConstraintBytes = size_t{1} << 20;
constexpr size_t kMaxChoices = 100'000;

// Attention capture holds n_layer·n_head·n² floats for a prompt of n tokens: a hard ceiling on it.
constexpr int64_t kMaxCaptureBytes = int64_t{1} << 30;

struct RequestLimits {
  int32_t vocab_size = 0;     // token ids must lie in [0, vocab_size)
  int32_t max_model_len = 0;  // prompt + output never exceeds this
  int32_t n_layer = 0;        // for inspect.*: the model's layers
  int32_t n_head = 0;         // and query heads per layer
};

// Empty when the request is acceptable; otherwise a message that starts with the bad field's name.
std::string validate_request(const Request& request, const RequestLimits& limits);

}  // namespace kvserve
