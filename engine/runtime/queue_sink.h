// A ResultSink that queues events for a consumer thread to pop (tools, tests, benchmarks).
// on_event never blocks the engine loop: it only appends under a short lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>

#include "common/request.h"

namespace kvserve {

class QueueSink : public ResultSink {
 public:
  void on_event(Event event) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(std::move(event));
    }
    cv_.notify_all();
  }
  // Waits for the next event (nullopt after `timeout`).
  std::optional<Event> pop(std::chrono::milliseconds timeout = std::chrono::hours(1)) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return std::nullopt;
    Event e = std::move(events_.front());
    events_.pop_front();
    return e;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_;
};

}  // namespace kvserve
