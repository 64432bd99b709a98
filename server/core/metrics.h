// Prometheus metrics with the names operators know from vLLM (kvserve:...), and the
// Gateway API Inference Extension's model-server protocol under vLLM's own names (vllm:...),
// shared by every front end: gauges and counters are read from the stats snapshot the engine
// publishes each step (a scrape never waits on the engine loop); latency histograms are filled
// from each request's events as they stream.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine.h"

namespace kvserve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}
  void observe(double v);
  // Appends the Prometheus text for this histogram.
  void render(const std::string& name, const std::string& help, std::string& out) const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  void observe_completion(const Completion& c);
  void observe_inter_token(double seconds) { itl_.observe(seconds); }
  // info: the model's cache figures (bytes per token, and for latent attention the per-head figure).
  std::string render(const EngineStats& stats, const ModelInfo& info) const;

 private:
  Histogram ttft_, itl_, e2e_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> finished_;  // by finish reason
};

// One stream's view for the metrics: call observe() with every event of the request, in order.
class StreamMetrics {
 public:
  explicit StreamMetrics(ServerMetrics& metrics) : metrics_(metrics) {}
  void observe(const Event& event);

 private:
  ServerMetrics& metrics_;
  std::chrono::steady_clock::time_point last_token_{};
};

}  // namespace kvserve
