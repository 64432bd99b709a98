#include "metrics.h"

#include <microhttpd.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace kvserve {
namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void metric(std::string& out, const char* type, const std::string& name, const std::string& help, double value) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " + num(value) + "\n";
}

}  // namespace

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lock(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& help, std::string& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n";
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += name + "_bucket{le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  out += name + "_sum " + num(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

ServerMetrics::ServerMetrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0}),
      itl_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5}),
      e2e_({0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0}) {}

void ServerMetrics::observe_completion(const Completion& c) {
  if (c.completion_tokens > 0) ttft_.observe(c.time_to_first_token_s);
  e2e_.observe(c.total_time_s);
  std::lock_guard<std::mutex> lock(mu_);
  ++finished_[finish_reason_name(c.reason)];
}

std::string ServerMetrics::render(const EngineStats& s) const {
  std::string out;
  metric(out, "gauge", "kvserve:num_requests_running", "Requests in the running batch.", s.running);
  metric(out, "gauge", "kvserve:num_requests_waiting", "Requests waiting to be admitted.", s.waiting);
  metric(out, "gauge", "kvserve:num_requests_waiting_background",
         "Inspection sub-requests waiting (background priority).", s.waiting_background);
  metric(out, "gauge", "kvserve:kv_cache_usage_perc", "Fraction of KV blocks in use (1 = full).", s.kv_usage);
  metric(out, "counter", "kvserve:num_preemptions_total", "Sequences preempted (KV dropped, recomputed later).",
         static_cast<double>(s.preemptions_total));
  metric(out, "counter", "kvserve:prompt_tokens_total", "Prompt tokens computed.", static_cast<double>(s.prompt_tokens_total));
  metric(out, "counter", "kvserve:generation_tokens_total", "Tokens generated.",
         static_cast<double>(s.generation_tokens_total));
  metric(out, "gauge", "kvserve:prefix_cache_hit_rate", "Prompt tokens reused from the prefix cache / admitted.",
         s.prefix_cache_hit_rate);
  metric(out, "gauge", "kvserve:prefix_cache_blocks", "KV blocks registered in the prefix cache.", s.cached_blocks);
  metric(out, "gauge", "kvserve:kv_cache_blocks_total", "KV blocks in the cache.", s.blocks_total);
  {
    std::lock_guard<std::mutex> lock(mu_);
    out += "# HELP kvserve:request_success_total Finished requests by finish reason.\n"
           "# TYPE kvserve:request_success_total counter\n";
    for (const auto& [reason, n] : finished_)
      out += "kvserve:request_success_total{finished_reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  }
  ttft_.render("kvserve:time_to_first_token_seconds", "Time from submit to the first generated token.", out);
  itl_.render("kvserve:inter_token_latency_seconds", "Time between consecutive generated tokens.", out);
  e2e_.render("kvserve:e2e_request_latency_seconds", "Time from submit to the final event.", out);
  return out;
}

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
  return {200, "text/plain; version=0.0.4", metrics_.render(engine_.stats())};
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
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string where = host + ":" + std::to_string(port);
  const std::string bare = host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2) : host;
  if (getaddrinfo(bare.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    throw std::runtime_error("cannot resolve " + where);
  sockaddr_storage addr{};
  std::memcpy(&addr, found->ai_addr, found->ai_addrlen);
  const bool v6 = found->ai_family == AF_INET6;
  freeaddrinfo(found);
  unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | (v6 ? MHD_USE_IPv6 : 0);
  daemon_ = MHD_start_daemon(flags, static_cast<uint16_t>(port), nullptr, nullptr, &on_request, this,
                             MHD_OPTION_SOCK_ADDR, reinterpret_cast<sockaddr*>(&addr),
                             MHD_OPTION_CONNECTION_LIMIT, kMaxConnections,
                             MHD_OPTION_CONNECTION_TIMEOUT, kIdleTimeoutSeconds,
                             MHD_OPTION_LISTENING_ADDRESS_REUSE, 0u,  // SO_REUSEADDR only: no shared port
                             MHD_OPTION_END);
  if (!daemon_) throw std::runtime_error("cannot listen on " + where + " (in use, or not an address of this host)");
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
  return info ? info->port : port;
}

void MetricsServer::stop() {
  if (daemon_) MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

}  // namespace kvserve
