// What the inspection calls (InspectAttention, HeadImportance) share whatever transport carries
// them: a slot of server.max_inspect_calls, the prompt's checks, the engine request every probe
// copies, and how a batch of completions ends the call.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/service_state.h"
#include "core/service_status.h"
#include "runtime/engine.h"

namespace kvserve {

// One of server.max_inspect_calls, held by a call. It is given back (once) before the call's
// answer is sent, so that the client's next call never finds it still taken, and when the call
// object goes at the latest.
class InspectionSlot {
 public:
  InspectionSlot() = default;
  InspectionSlot(const InspectionSlot&) = delete;
  InspectionSlot& operator=(const InspectionSlot&) = delete;
  ~InspectionSlot() { release(); }

  // RESOURCE_EXHAUSTED (naming the setting) when every slot is taken.
  ServiceStatus take(ServiceState& state);
  void release();

 private:
  ServiceState* state_ = nullptr;
  std::atomic<bool> held_{false};
};

// The prompt of an inspection call (core/request_input.h's inspection_prompt with this
// server's tokenizer and server.inspect_max_tokens).
ServiceStatus inspection_prompt(ServiceState& state, const std::string& text, std::span<const int32_t> ids,
                                std::vector<int32_t>* out);

// The request each probe of a call copies: the prompt scored, one greedy token, background
// priority (beside generation traffic, never ahead of it).
Request inspection_request(std::vector<int32_t> prompt, int64_t deadline_ms);

// OK when every request ran to its end; otherwise the status of the first that did not.
ServiceStatus completions_status(const std::vector<Completion>& done, bool shutting_down);

// The mean log-likelihood per scored prompt token.
double mean_logprob(const Completion& c);

}  // namespace kvserve
