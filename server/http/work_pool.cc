#include "http/work_pool.h"

namespace kvserve {

WorkPool::WorkPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { run(); });
}

void WorkPool::post(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      jobs_.push_back(std::move(job));
      cv_.notify_one();
      return;
    }
  }
  job();
}

void WorkPool::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

void WorkPool::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace kvserve
