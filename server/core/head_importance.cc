#include "core/head_importance.h"

#include "core/inspection.h"

namespace kvserve {

void HeadImportanceJob::start(double loss_budget) {
  if (ServiceStatus st = check_loss_budget(loss_budget); !st.ok()) return finish(st);
  result_.loss_budget = loss_budget;
  base_.inspect.score_prompt = true;
  // The baseline, then every head zeroed on its own.
  const ModelInfo& info = state_.engine().model_info();
  std::vector<Request> requests{base_};
  for (int32_t l = 0; l < info.n_layer; ++l)
    for (int32_t h = 0; h < info.n_head; ++h) {
      requests.push_back(base_);
      requests.back().inspect.ablate_heads = {{l, h}};
    }
  run_phase(std::move(requests), &HeadImportanceJob::rank);
}

void HeadImportanceJob::run_phase(std::vector<Request> requests, void (HeadImportanceJob::*next)(std::vector<Completion>&)) {
  auto fan_out = std::make_shared<EngineFanOut>(state_.engine());
  bool cancelled;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled = cancelled_;
    if (!cancelled) fan_out_ = fan_out;
  }
  if (cancelled) return finish({ServiceCode::kCancelled, "request cancelled"});
  // The job stays alive until its last phase is done, whoever else lets it go.
  auto self = shared_from_this();
  // Submitting only queues, so a phase started from the loop thread cannot deadlock.
  SubmitResult r = fan_out->start(std::move(requests), [self, next](std::vector<Completion>& done) { (self.get()->*next)(done); });
  if (!r.ok()) finish(submit_status(r));
}

void HeadImportanceJob::rank(std::vector<Completion>& done) {
  if (ServiceStatus st = completions_status(done, state_.shutting_down()); !st.ok()) return finish(st);
  const double baseline = mean_logprob(done[0]);
  result_.n_tokens = done[0].prompt_logprob_count;
  result_.baseline_mean_logprob = baseline;
  std::vector<double> single;
  for (size_t i = 1; i < done.size(); ++i) single.push_back(mean_logprob(done[i]));
  result_.heads = rank_heads(baseline, single, state_.engine().model_info().n_head);
  // Which heads can go together, measured in one more batch.
  prefixes_ = pruning_prefixes(result_.heads, result_.loss_budget);
  estimated_.clear();
  double sum = 0;
  for (auto it = result_.heads.rbegin(); it != result_.heads.rend() && estimated_.size() < prefixes_.size(); ++it)
    estimated_.push_back(sum += it->drop);
  std::vector<Request> requests;
  for (const auto& heads : prefixes_) {
    requests.push_back(base_);
    requests.back().inspect.ablate_heads = heads;
  }
  run_phase(std::move(requests), &HeadImportanceJob::measure_joint);
}

void HeadImportanceJob::measure_joint(std::vector<Completion>& done) {
  if (ServiceStatus st = completions_status(done, state_.shutting_down()); !st.ok()) return finish(st);
  std::vector<double> measured;
  for (const Completion& c : done) measured.push_back(result_.baseline_mean_logprob - mean_logprob(c));
  const size_t best = prunable_count(measured, result_.loss_budget);
  if (best > 0) result_.prunable = prefixes_[best - 1];
  result_.prunable_estimated_drop = best ? estimated_[best - 1] : 0.0;
  result_.prunable_measured_drop = best ? measured[best - 1] : 0.0;
  finish({});
}

void HeadImportanceJob::cancel() {
  std::shared_ptr<EngineFanOut> fan_out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_ = true;
    fan_out = fan_out_;
  }
  if (fan_out) fan_out->cancel();
}

void HeadImportanceJob::finish(const ServiceStatus& status) {
  Finished f;
  {
    std::lock_guard<std::mutex> lock(mu_);
    f = std::move(finished_);
    finished_ = nullptr;
    fan_out_.reset();
  }
  if (f) f(status, result_);
}

}  // namespace kvserve
