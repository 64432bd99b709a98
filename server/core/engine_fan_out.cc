#include "core/engine_fan_out.h"

namespace kvserve {

class EngineFanOut::Sink : public ResultSink {
 public:
  Sink(std::shared_ptr<EngineFanOut> owner, size_t index) : owner_(std::move(owner)), index_(index) {}
  void on_event(Event event) override {
    if (event.completion) owner_->complete(index_, std::move(*event.completion));
  }

 private:
  std::shared_ptr<EngineFanOut> owner_;
  size_t index_;
};

SubmitResult EngineFanOut::start(std::vector<Request> requests, Done done) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = std::move(done);
    remaining_ = requests.size();
    completions_.resize(requests.size());
  }
  for (size_t i = 0; i < requests.size(); ++i) {
    SubmitResult r = engine_.submit(std::move(requests[i]), std::make_shared<Sink>(shared_from_this(), i));
    if (!r.ok()) {
      std::vector<uint64_t> ids;
      {
        std::lock_guard<std::mutex> lock(mu_);
        failed_ = true;
        ids = ids_;
      }
      for (uint64_t id : ids) engine_.cancel(id);
      return r;
    }
    std::lock_guard<std::mutex> lock(mu_);
    ids_.push_back(r.id);
  }
  return {SubmitCode::kOk, 0, {}};
}

void EngineFanOut::cancel() {
  std::vector<uint64_t> ids;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ids = ids_;
  }
  for (uint64_t id : ids) engine_.cancel(id);
}

void EngineFanOut::complete(size_t index, Completion completion) {
  Done done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    completions_[index] = std::move(completion);
    if (--remaining_ > 0 || failed_) return;
    done = std::move(done_);
  }
  done(completions_);
}

}  // namespace kvserve
