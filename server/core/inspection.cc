#include "core/inspection.h"

#include "core/request_input.h"

namespace kvserve {

ServiceStatus InspectionSlot::take(ServiceState& state) {
  if (!state.begin_inspection())
    return {ServiceCode::kResourceExhausted, "inspection: " + std::to_string(state.max_inspect_calls()) +
                                                 " calls already running (server.max_inspect_calls); try again later"};
  state_ = &state;
  held_ = true;
  return {};
}

void InspectionSlot::release() {
  if (held_.exchange(false)) state_->end_inspection();
}

ServiceStatus inspection_prompt(ServiceState& state, const std::string& text, std::span<const int32_t> ids,
                                std::vector<int32_t>* out) {
  return inspection_prompt(state.engine().tokenizer(), state.inspect_max_tokens(), text, ids, out);
}

Request inspection_request(std::vector<int32_t> prompt, int64_t deadline_ms) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.max_new_tokens = 1;
  r.sampling.temperature = 0.0f;
  r.sampling.ignore_eos = true;
  r.priority = Priority::kBackground;
  r.deadline_ms = deadline_ms;
  return r;
}

ServiceStatus completions_status(const std::vector<Completion>& done, bool shutting_down) {
  for (const Completion& c : done)
    if (ServiceStatus s = completion_status(c, shutting_down); !s.ok()) return s;
  return {};
}

double mean_logprob(const Completion& c) {
  return c.prompt_logprob_count ? c.prompt_logprob_sum / c.prompt_logprob_count : 0.0;
}

}  // namespace kvserve
