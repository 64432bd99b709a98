// Test helpers around the Engine: collect a request's events, and greedy references.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/queue_sink.h"

namespace kvserve::testing {

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  Completion completion;
  int events = 0;
};

// Drains `sink` until the request's final event (fails the test after `timeout`).
inline Outcome collect(QueueSink& sink, std::chrono::seconds timeout = std::chrono::seconds(120)) {
  Outcome o;
  for (;;) {
    auto ev = sink.pop(std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
    if (!ev) {
      ADD_FAILURE() << "no final event within the timeout";
      return o;
    }
    ++o.events;
    o.tokens.insert(o.tokens.end(), ev->token_ids.begin(), ev->token_ids.end());
    o.text += ev->text;
    if (ev->completion) {
      o.completion = *ev->completion;
      return o;
    }
  }
}

inline Request greedy_request(std::vector<int32_t> prompt, int max_new) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.max_new_tokens = max_new;
  r.sampling.ignore_eos = true;
  return r;
}

}  // namespace kvserve::testing
