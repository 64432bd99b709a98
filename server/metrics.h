// Prometheus metrics with the names operators know from vLLM (kvserve:...), served as text on
// their own port by libmicrohttpd: one epoll thread for every connection, so idle or trickling
// clients hold no thread and cannot delay a scrape. Gauges and counters are read from the
// engine's stats at scrape time; latency histograms are filled as requests stream.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/bearer_auth.h"
#include "runtime/engine.h"

struct MHD_Daemon;

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

// Serves GET /metrics. start() binds (port 0 picks a free one; a port in use is an error, never
// shared) and returns the bound port. With `auth` set, a scrape needs a bearer token too.
class MetricsServer {
 public:
  static constexpr unsigned kMaxConnections = 256;  // beyond: new connections are refused
  static constexpr unsigned kIdleTimeoutSeconds = 5;  // a connection silent this long is closed

  MetricsServer(const Engine& engine, const ServerMetrics& metrics, const BearerAuth* auth = nullptr);
  ~MetricsServer();
  int start(const std::string& host, int port);  // throws std::runtime_error if it cannot bind
  void stop();

  // The response to one request (for the daemon's callback): status, content type and body.
  struct Reply {
    unsigned status;
    std::string content_type, body;
  };
  Reply answer(const std::string& method, const std::string& url, const char* authorization) const;

 private:
  const Engine& engine_;
  const ServerMetrics& metrics_;
  const BearerAuth* auth_;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace kvserve
