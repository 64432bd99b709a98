// A few threads that run the HTTP front end's heavier work (parsing, validating and tokenizing
// a body) so that the one connection thread never waits on it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvserve {

class WorkPool {
 public:
  explicit WorkPool(int threads);
  ~WorkPool() { stop(); }
  void post(std::function<void()> job);
  // Runs what was posted, then joins the threads; later posts run on the caller's thread.
  void stop();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace kvserve
