#include "runtime/request_validation.h"

#include <cmath>

#include "text/utf8.h"

namespace kvserve {

std::string validate_request(const Request& r, const RequestLimits& limits) {
  const SamplingParams& s = r.sampling;
  const int32_t V = limits.vocab_size;
  if (r.prompt.empty()) return "prompt: empty (give at least one token)";
  for (size_t i = 0; i < r.prompt.size(); ++i)
    if (r.prompt[i] < 0 || r.prompt[i] >= V)
      return "prompt_token_ids[" + std::to_string(i) + "]: " + std::to_string(r.prompt[i]) +
             " is outside the vocabulary [0, " + std::to_string(V) + ")";
  if (s.max_new_tokens < 1) return "sampling.max_new_tokens: must be at least 1";
  if (s.max_new_tokens > limits.max_model_len)
    return "sampling.max_new_tokens: " + std::to_string(s.max_new_tokens) + " exceeds max_model_len " +
           std::to_string(limits.max_model_len);
  if (!std::isfinite(s.temperature) || s.temperature < 0.0f || s.temperature > 100.0f)
    return "sampling.temperature: must be between 0 and 100";
  if (s.top_k < 0) return "sampling.top_k: must be >= 0 (0 = off)";
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) return "sampling.top_p: must be in (0, 1]";
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f)) return "sampling.min_p: must be in [0, 1]";
  if (!(s.repetition_penalty > 0.0f && s.repetition_penalty <= 10.0f))
    return "sampling.repetition_penalty: must be in (0, 10]";
  if (!(s.presence_penalty >= -2.0f && s.presence_penalty <= 2.0f))
    return "sampling.presence_penalty: must be in [-2, 2]";
  if (!(s.frequency_penalty >= -2.0f && s.frequency_penalty <= 2.0f))
    return "sampling.frequency_penalty: must be in [-2, 2]";
  if (s.stop.size() > kMaxStopStrings)
    return "sampling.stop: at most " + std::to_string(kMaxStopStrings) + " stop strings";
  for (size_t i = 0; i < s.stop.size(); ++i) {
    if (s.stop[i].empty() || s.stop[i].size() > kMaxStopBytes)
      return "sampling.stop[" + std::to_string(i) + "]: must be 1 to " + std::to_string(kMaxStopBytes) + " bytes";
    if (!utf8_is_valid(s.stop[i])) return "sampling.stop[" + std::to_string(i) + "]: not valid UTF-8";
  }
  if (s.stop_token_ids.size() > kMaxStopTokens)
    return "sampling.stop_token_ids: at most " + std::to_string(kMaxStopTokens) + " ids";
  for (size_t i = 0; i < s.stop_token_ids.size(); ++i)
    if (s.stop_token_ids[i] < 0 || s.stop_token_ids[i] >= V)
      return "sampling.stop_token_ids[" + std::to_string(i) + "]: outside the vocabulary";
  if (s.top_logprobs < 0 || s.top_logprobs > kMaxTopLogprobs)
    return "sampling.top_logprobs: must be between 0 and " + std::to_string(kMaxTopLogprobs);
  if (s.prompt_logprobs < -1 || s.prompt_logprobs > kMaxTopLogprobs)
    return "sampling.prompt_logprobs: must be between 0 and " + std::to_string(kMaxTopLogprobs) + " (or unset)";
  if (s.logit_bias.size() > static_cast<size_t>(V)) return "sampling.logit_bias: more entries than the vocabulary";
  for (const auto& [t, b] : s.logit_bias) {
    if (t < 0 || t >= V)
      return "sampling.logit_bias: token " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(V) + ")";
    if (!(b >= -100.0f && b <= 100.0f)) return "sampling.logit_bias: values must be between -100 and 100";
  }
  if (s.constraint.kind == OutputConstraint::Kind::kChoice && s.constraint.choices.size() > kMaxChoices)
    return "sampling.constraint: at most " + std::to_string(kMaxChoices) + " choices";
  if (s.constraint.text.size() > kMaxConstraintBytes)
    return "sampling.constraint: at most " + std::to_string(kMaxConstraintBytes >> 10) + " KiB";
  if (r.deadline_ms < 0) return "deadline_ms: must be >= 0";
  const InspectOptions& in = r.inspect;
  if (in.capture_attention) {
    const int64_t n = static_cast<int64_t>(r.prompt.size());
    const int64_t bytes = int64_t{limits.n_layer} * limits.n_head * n * n * static_cast<int64_t>(sizeof(float));
    if (bytes > kMaxCaptureBytes)
      return "inspect.capture_attention: a prompt of " + std::to_string(n) + " tokens needs " +
             std::to_string(bytes >> 20) + " MiB of attention; at most " + std::to_string(kMaxCaptureBytes >> 20);
  }
  if (in.ablate_heads.size() > static_cast<size_t>(limits.n_layer) * limits.n_head)
    return "inspect.ablate_heads: more heads than the model has";
  for (size_t i = 0; i < in.ablate_heads.size(); ++i) {
    const HeadRef& h = in.ablate_heads[i];
    if (h.layer < 0 || h.layer >= limits.n_layer || h.head < 0 || h.head >= limits.n_head)
      return "inspect.ablate_heads[" + std::to_string(i) + "]: layer " + std::to_string(h.layer) + " head " +
             std::to_string(h.head) + " is outside the model (" + std::to_string(limits.n_layer) + " layers of " +
             std::to_string(limits.n_head) + " heads)";
  }
  return {};
}

}  // namespace kvserve
