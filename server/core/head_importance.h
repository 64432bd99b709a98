// The head-importance workflow (HeadImportance over gRPC, POST /v1/head_importance over HTTP),
// transport-neutral: the prompt scored as it is and with every head zeroed on its own, the heads
// ranked by how much each alone lowers the mean log-likelihood, then the least important
// prefixes zeroed together in one more batch to find which heads fit the loss budget
// (inspect/head_pruning.h). All of it runs as background-priority engine requests beside
// generation traffic.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/engine_fan_out.h"
#include "core/service_state.h"
#include "core/service_status.h"
#include "inspect/head_pruning.h"

namespace kvserve {

struct HeadImportanceResult {
  int32_t n_tokens = 0;                 // prompt tokens scored
  double baseline_mean_logprob = 0;     // nats per token, nothing zeroed
  double loss_budget = 0;               // as asked (nats per token)
  std::vector<HeadDrop> heads;          // every head, most important first
  std::vector<HeadRef> prunable;        // the largest measured set within the budget
  double prunable_estimated_drop = 0;   // its single drops summed
  double prunable_measured_drop = 0;    // its drop measured with all of it zeroed
};

// The default loss budget, nats per token.
constexpr double kDefaultLossBudget = 0.01;

// A loss budget must lie in [0, 100] nats per token (INVALID_ARGUMENT naming loss_budget).
inline ServiceStatus check_loss_budget(double budget) {
  if (budget >= 0.0 && budget <= 100.0) return {};
  return {ServiceCode::kInvalidArgument, "loss_budget: must be between 0 and 100"};
}

class HeadImportanceJob : public std::enable_shared_from_this<HeadImportanceJob> {
 public:
  using Finished = std::function<void(const ServiceStatus& status, HeadImportanceResult& result)>;

  // base: the scored request every probe copies (inspection_request). `finished` runs exactly
  // once: on the engine loop thread when the work ends, or before start returns when it is
  // refused. It must queue and return, never block.
  HeadImportanceJob(ServiceState& state, Request base, Finished finished)
      : state_(state), base_(std::move(base)), finished_(std::move(finished)) {}

  // loss_budget in [0, 100] nats per token (INVALID_ARGUMENT naming loss_budget otherwise).
  // The job must be held by a shared_ptr.
  void start(double loss_budget);
  // Cancels the engine requests still running; `finished` then reports CANCELLED.
  void cancel();

 private:
  void run_phase(std::vector<Request> requests, void (HeadImportanceJob::*next)(std::vector<Completion>&));
  void rank(std::vector<Completion>& done);
  void measure_joint(std::vector<Completion>& done);
  void finish(const ServiceStatus& status);

  ServiceState& state_;
  Request base_;
  Finished finished_;
  HeadImportanceResult result_;
  std::vector<std::vector<HeadRef>> prefixes_;  // the candidate sets measured together
  std::vector<double> estimated_;               // [k-1]: the single drops of prefix k, summed
  std::mutex mu_;
  std::shared_ptr<EngineFanOut> fan_out_;       // the current phase: singles, then the joint check
  bool cancelled_ = false;
};

}  // namespace kvserve
