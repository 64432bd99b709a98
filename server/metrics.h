// Prometheus metrics with the names operators know from vLLM (kvserve:...), served as text on
// their own port by a small HTTP server (cpp-httplib). Gauges and counters are read from the
// engine's stats at scrape time; latency histograms are filled as requests stream.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine.h"

namespace httplib {
class Server;
}

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
  std::string render(const EngineStats& stats) const;

 private:
  Histogram ttft_, itl_, e2e_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> finished_;  // by finish reason
};

// Serves GET /metrics. start() binds (port 0 picks a free one) and returns the bound port.
class MetricsServer {
 public:
  MetricsServer(const Engine& engine, const ServerMetrics& metrics);
  ~MetricsServer();
  int start(const std::string& host, int port);  // throws std::runtime_error if it cannot bind
  void stop();

 private:
  const Engine& engine_;
  const ServerMetrics& metrics_;
  std::unique_ptr<httplib::Server> http_;
  std::thread thread_;
};

}  // namespace kvserve
