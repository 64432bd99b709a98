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

}  // namespace kvserve
