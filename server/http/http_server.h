// The OpenAI-compatible HTTP front end (server.http_listen) on libmicrohttpd: one epoll thread
// for every connection; a streaming or waiting request parks (suspends) its connection and the
// engine's events resume it, so 256 concurrent streams need no thread each. Routes:
// POST /v1/completions (streamed as Server-Sent Events or not), GET /v1/models, GET /health,
// POST /v1/chat/completions (the model's chat template; chat.completion shapes), POST
// /tokenize, /detokenize, /apply-template and /abort, POST /v1/head_importance (the
// head-importance workflow of server/core/head_importance.h), GET /metrics. Auth, request ids (a
// client's X-Request-Id, abortable through either front end), draining, status mapping and
// metrics come from the service state shared with gRPC (server/core/service_state.h).
#pragma once

#include <nlohmann/json.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "core/service_state.h"
#include "http/connection_watch.h"
#include "http/openai_api.h"
#include "http/openai_routes.h"
#include "http/work_pool.h"
#include "runtime/engine.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace kvserve {

struct HttpOptions {
  int64_t max_body_bytes = 4 << 20;  // larger bodies get 413 (server.max_message_bytes)
  std::vector<std::string> model_ids;  // names the "model" field may use; the first is listed
  bool metrics_auth = false;           // /metrics needs a bearer token too
  std::string tls_cert_pem, tls_key_pem;  // both set: HTTPS with them (the gRPC port's certificate)
  WatchLimits limits;                  // header and body deadlines (server.http_*_timeout_ms)
  int32_t idle_timeout_s = 60;         // no progress on a connection that has a reply to send
  int32_t max_connections_per_client = 512;  // per client address (server.http_max_connections_per_client)
  int32_t workers = 2;                 // threads that parse and tokenize bodies (server.http_workers)
};

class HttpServer {
 public:
  static constexpr unsigned kMaxConnections = 1024;

  // state: what the front ends share (auth, metrics, request ids, draining); it outlives this.
  HttpServer(ServiceState& state, HttpOptions options);
  ~HttpServer();
  // Binds exclusively (a port in use is an error) and returns the bound port; throws
  // std::runtime_error naming the address when it cannot.
  int start(const std::string& host, int port);
  void stop();

  struct Call;  // one HTTP request's state (http_server.cc)
  // For the daemon's callbacks: answers a request whose body has been read (or resumes one);
  // true when the connection should stay (a reply was queued or it was suspended).
  bool handle(MHD_Connection* c, Call& call);
  // A request ended (answered, or its client went away): a generation still running is cancelled.
  void finished(Call& call);
  int64_t max_body_bytes() const { return options_.max_body_bytes; }
  ConnectionWatch& watch() { return watch_; }

 private:
  bool start_completion(MHD_Connection* c, Call& call, CompletionCall cc, bool chat);
  bool start_head_importance(MHD_Connection* c, Call& call, HeadImportanceInput in);
  bool reply_logged(MHD_Connection* c, Call& call, unsigned status, const std::string& body);
  bool refuse(MHD_Connection* c, Call& call, const ServiceStatus& s);  // OpenAI's error object, logged

  ServiceState& state_;
  HttpOptions options_;
  ConnectionWatch watch_;
  WorkPool workers_;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace kvserve
