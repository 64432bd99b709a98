// One call served by several engine requests: submits them together (the scheduler batches them
// like any other traffic), gathers their completions, and runs `done` once, on the engine loop
// thread, when the last one is in. Used by the inspection RPCs.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/engine.h"

namespace kvserve {

class EngineFanOut : public std::enable_shared_from_this<EngineFanOut> {
 public:
  using Done = std::function<void(std::vector<Completion>& completions)>;

  explicit EngineFanOut(Engine& engine) : engine_(engine) {}

  // Submits every request. On a refusal, cancels those already in, never runs `done`, and
  // returns the refusal; otherwise `done` runs exactly once.
  SubmitResult start(std::vector<Request> requests, Done done);
  // Cancels whatever is still running (their completions say kCancelled).
  void cancel();

 private:
  class Sink;
  void complete(size_t index, Completion completion);

  Engine& engine_;
  std::mutex mu_;
  std::vector<uint64_t> ids_;
  std::vector<Completion> completions_;
  size_t remaining_ = 0;
  bool failed_ = false;
  Done done_;
};

}  // namespace kvserve
