#include "metrics.h"

#include "http/mhd_address.h"

#include <microhttpd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace kvserve {

MetricsServer::MetricsServer(const Engine& engine, const ServerMetrics& metrics, const BearerAuth* auth)
    : engine_(engine), metrics_(metrics), auth_(auth) {}

MetricsServer::~MetricsServer() { stop(); }

MetricsServer::Reply MetricsServer::answer(const std::string& method, const std::string& url,
                                           const char* authorization) const {
  if (url != "/metrics") return {404, "text/plain", "not found: only /metrics is served here\n"};
  if (method != "GET" && method != "HEAD") return {405, "text/plain", "method not allowed: use GET\n"};
  if (auth_ && auth_->enabled()) {
    std::optional<std::string_view> header;
    if (authorization) header = std::string_view(authorization);
    if (!auth_->tenant(header)) return {401, "text/plain", std::string(BearerAuth::kUnauthenticatedMessage) + "\n"};
  }
  return {200, "text/plain; version=0.0.4", metrics_.render(engine_.stats(), engine_.model_info())};
}

namespace {

MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url, const char* method, const char*,
                      const char*, size_t* upload_size, void** request_state) {
  // First call per request: headers only. Any body is read and dropped before answering.
  if (*request_state == nullptr) {
    static int marker;
    *request_state = &marker;
    return MHD_YES;
  }
  if (*upload_size > 0) {
    *upload_size = 0;
    return MHD_YES;
  }
  const auto* server = static_cast<const MetricsServer*>(cls);
  const MetricsServer::Reply reply = server->answer(
      method, url, MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION));
  MHD_Response* response =
      MHD_create_response_from_buffer(reply.body.size(), const_cast<char*>(reply.body.data()), MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, reply.content_type.c_str());
  if (reply.status == 401) MHD_add_response_header(response, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  const MHD_Result r = MHD_queue_response(connection, reply.status, response);
  MHD_destroy_response(response);
  return r;
}

}  // namespace

int MetricsServer::start(const std::string& host, int port) {
  const std::string where = host + ":" + std::to_string(port);
  BindAddress bind = resolve_bind_address(host, port);
  const bool v6 = bind.v6;
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | (v6 ? MHD_USE_IPv6 : 0);
  int bound_port = 0;
  const int fd = listen_socket(bind, where, &bound_port);  // SO_REUSEADDR, never SO_REUSEPORT
  daemon_ = MHD_start_daemon(flags, 0, nullptr, nullptr, &on_request, this, MHD_OPTION_LISTEN_SOCKET, fd,
                             MHD_OPTION_CONNECTION_LIMIT, kMaxConnections,
                             MHD_OPTION_CONNECTION_TIMEOUT, kIdleTimeoutSeconds,
                             MHD_OPTION_END);
  if (!daemon_) {
    close(fd);
    throw std::runtime_error("cannot serve on " + where);
  }
  return bound_port;
}

void MetricsServer::stop() {
  if (daemon_) MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

}  // namespace kvserve
