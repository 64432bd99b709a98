#include "core/request_input.h"

#include <algorithm>

#include "text/utf8.h"

namespace kvserve {

ServiceStatus resolve_prompt(const std::string& text, std::span<const int32_t> ids, const Tokenizer& tokenizer,
                             std::vector<int32_t>* out) {
  const bool has_text = !text.empty(), has_ids = !ids.empty();
  if (has_text == has_ids)
    return {ServiceCode::kInvalidArgument, has_text ? "prompt, prompt_token_ids: give one of them, not both"
                                                    : "prompt: empty (give prompt text or prompt_token_ids)"};
  if (has_text) {
    if (!utf8_is_valid(text)) return {ServiceCode::kInvalidArgument, "prompt: not valid UTF-8"};
    *out = tokenizer.encode(text, true);
  } else {
    out->assign(ids.begin(), ids.end());
  }
  return {};
}

int64_t deadline_ms_until(std::chrono::system_clock::time_point deadline) {
  if (deadline == std::chrono::system_clock::time_point::max()) return 0;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::system_clock::now());
  return std::max<int64_t>(1, ms.count());
}

ServiceStatus inspection_prompt(const Tokenizer& tokenizer, int32_t max_tokens, const std::string& text,
                                std::span<const int32_t> ids, std::vector<int32_t>* out) {
  if (ServiceStatus st = resolve_prompt(text, ids, tokenizer, out); !st.ok()) return st;
  if (out->size() < 2)
    return {ServiceCode::kInvalidArgument, "prompt: at least 2 tokens are needed, got " + std::to_string(out->size())};
  if (static_cast<int64_t>(out->size()) > max_tokens)
    return {ServiceCode::kInvalidArgument, "prompt: " + std::to_string(out->size()) + " tokens; inspection takes at most " +
                                               std::to_string(max_tokens) + " (server.inspect_max_tokens)"};
  return {};
}

}  // namespace kvserve
