// The Prometheus metrics (core/metrics.h) served as text on their own port by libmicrohttpd:
// one epoll thread for every connection, so idle or trickling clients hold no thread and cannot
// delay a scrape.
#pragma once

#include <string>

#include "core/bearer_auth.h"
#include "core/metrics.h"
#include "runtime/engine.h"

struct MHD_Daemon;

namespace kvserve {

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
