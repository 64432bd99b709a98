#include "http/http_server.h"

#include <microhttpd.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <exception>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/head_importance.h"
#include "core/inspection.h"
#include "core/json_body.h"
#include "core/log_text.h"
#include "core/request_input.h"
#include "core/service_status.h"
#include "core/request_ids.h"
#include "http/mhd_address.h"
#include "http/openai_api.h"
#include "http/openai_routes.h"

namespace kvserve {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// One running completion: the engine's sink. Events arrive on the engine's loop thread; the
// connection is parked (suspended) while there is nothing to send, and each event resumes it.
class CompletionStream final : public ResultSink {
 public:
  CompletionStream(CompletionWriter writer, bool stream, bool include_usage, ServiceState& state)
      : writer_(std::move(writer)), stream_(stream), include_usage_(include_usage), stream_metrics_(state.metrics()),
        state_(state) {}

  // What cannot be written ends the reply with an error, and is rethrown so that the engine ends
  // the generation too (its sink guard); later events of that request are ignored.
  void on_event(Event event) override {
    MHD_Connection* resume = nullptr;
    std::exception_ptr failure;
    {
      std::lock_guard lock(mu_);
      if (failed_) return;
      try {
        stream_metrics_.observe(event);
        if (event.completion) {
          completion_ = *event.completion;
          status_ = completion_status(*event.completion, state_.shutting_down());
        }
        if (stream_)
          pending_ += writer_.stream_event(event, include_usage_, status_);
        else
          writer_.add(event);
      } catch (const std::exception& e) {
        status_ = {ServiceCode::kInternal, std::string("the reply could not be written: ") + valid_utf8(e.what())};
        if (stream_) pending_ += "data: " + json_text(openai_error(status_)) + "\n\ndata: [DONE]\n\n";
        failed_ = true;
        if (!event.completion) failure = std::current_exception();
      }
      if (event.completion || failed_) done_ = true;
      if (suspended_ && connection_) {
        suspended_ = false;
        resume = connection_;
      }
    }
    if (resume) MHD_resume_connection(resume);
    if (failure) std::rethrow_exception(failure);
  }

  // For the SSE reader: bytes to send now, 0 (and the connection parked) when none yet, or
  // MHD_CONTENT_READER_END_OF_STREAM.
  ssize_t read(char* buf, size_t max) {
    std::lock_guard lock(mu_);
    if (!pending_.empty()) {
      const size_t n = std::min(max, pending_.size());
      std::memcpy(buf, pending_.data(), n);
      pending_.erase(0, n);
      return static_cast<ssize_t>(n);
    }
    if (done_) return MHD_CONTENT_READER_END_OF_STREAM;
    suspended_ = true;
    MHD_suspend_connection(connection_);
    return 0;
  }
  // For a non-streamed call: parks the connection unless the completion is already in; true if parked.
  bool park_unless_done() {
    std::lock_guard lock(mu_);
    if (done_) return false;
    suspended_ = true;
    MHD_suspend_connection(connection_);
    return true;
  }
  bool done() const {
    std::lock_guard lock(mu_);
    return done_;
  }
  // The whole reply once done: 200 and the body, or the error that ended it.
  std::pair<unsigned, std::string> whole_reply() const {
    std::lock_guard lock(mu_);
    if (!status_.ok()) return {http_status_of(status_.code), json_text(openai_error(status_))};
    return {200, json_text(writer_.body())};
  }
  // For the log line: how it ended.
  std::optional<Completion> completion() const {
    std::lock_guard lock(mu_);
    return completion_;
  }
  ServiceStatus status() const {
    std::lock_guard lock(mu_);
    return status_;
  }
  void attach(MHD_Connection* c) {
    std::lock_guard lock(mu_);
    connection_ = c;
  }
  void detach() {
    std::lock_guard lock(mu_);
    connection_ = nullptr;
  }

 private:
  mutable std::mutex mu_;
  CompletionWriter writer_;
  bool stream_, include_usage_;
  StreamMetrics stream_metrics_;
  const ServiceState& state_;
  std::string pending_;
  bool done_ = false, suspended_ = false, failed_ = false;
  std::optional<Completion> completion_;
  ServiceStatus status_;
  MHD_Connection* connection_ = nullptr;
};

}  // namespace

// A running POST /v1/head_importance: the job answers on the engine loop thread, into here, and
// resumes the parked connection unless the call has already gone.
struct InspectionReply {
  std::mutex mu;
  bool done = false;
  unsigned status = 200;
  std::string body;
  MHD_Connection* connection = nullptr;  // null once the call is finished
};

struct HttpServer::Call {
  std::string method, url, body;
  bool too_big = false;
  ConnectionWatch::Conn* conn = nullptr;
  Clock::time_point started = Clock::now();
  std::string tenant;
  // A POST handed to the workers: their answer, read once the connection is resumed.
  std::mutex mu;
  bool working = false, ready = false;
  RouteOutcome outcome;
  // A running completion.
  std::shared_ptr<CompletionStream> stream;
  std::string request_id;
  bool registered = false;  // request_id is in the service's registry (for /abort and gRPC Abort)
  uint64_t engine_id = 0;
  bool streaming = false;
  // A running head-importance job (POST /v1/head_importance) and its inspection slot.
  std::shared_ptr<HeadImportanceJob> job;
  std::shared_ptr<InspectionReply> inspection;
  InspectionSlot slot;
};

namespace {

MHD_Result reply(MHD_Connection* c, unsigned status, const std::string& content_type, const std::string& body) {
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type.c_str());
  if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  const MHD_Result result = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return result;
}

MHD_Result reply_json(MHD_Connection* c, unsigned status, const json& body) {
  return reply(c, status, "application/json", json_text(body));
}

MHD_Result reply_error(MHD_Connection* c, const ServiceStatus& s) {
  return reply_json(c, http_status_of(s.code), openai_error(s));
}

ssize_t read_stream(void* cls, uint64_t, char* buf, size_t max) {
  return static_cast<CompletionStream*>(cls)->read(buf, max);
}

ConnectionWatch::Conn* conn_of(MHD_Connection* c) {
  const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info ? static_cast<ConnectionWatch::Conn*>(info->socket_context) : nullptr;
}

MHD_Result on_request(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                      const char* upload, size_t* upload_size, void** state) {
  auto* server = static_cast<HttpServer*>(cls);
  if (*state == nullptr) {
    auto* call = new HttpServer::Call;
    call->method = method;
    call->url = url;
    call->conn = conn_of(c);
    if (call->conn) server->watch().headers_done(call->conn);
    *state = call;
    return MHD_YES;
  }
  auto& call = *static_cast<HttpServer::Call*>(*state);
  if (*upload_size > 0) {
    // Past the limit the rest is read and dropped (answered 413), never held.
    if (!call.too_big) {
      if (static_cast<int64_t>(call.body.size() + *upload_size) > server->max_body_bytes()) {
        call.too_big = true;
        call.body.clear();
        call.body.shrink_to_fit();
      } else {
        call.body.append(upload, *upload_size);
      }
    }
    *upload_size = 0;
    return MHD_YES;
  }
  if (call.conn) server->watch().body_done(call.conn);
  // Nothing a request does may end the process: what was not foreseen is a 500 for it alone.
  try {
    return server->handle(c, call) ? MHD_YES : MHD_NO;
  } catch (const std::exception& e) {
    spdlog::error("http {} {}: {}", log_escape(call.method), log_escape(call.url), log_escape(e.what()));
    return reply_error(c, {ServiceCode::kInternal, "internal error"});
  }
}

void on_completed(void* cls, MHD_Connection* c, void** state, MHD_RequestTerminationCode) {
  auto* server = static_cast<HttpServer*>(cls);
  if (ConnectionWatch::Conn* conn = conn_of(c)) server->watch().reply_done(conn);
  if (!*state) return;
  auto* call = static_cast<HttpServer::Call*>(*state);
  server->finished(*call);
  delete call;
  *state = nullptr;
}

void on_connection(void* cls, MHD_Connection* c, void** socket_context, MHD_ConnectionNotificationCode code) {
  auto* server = static_cast<HttpServer*>(cls);
  if (code == MHD_CONNECTION_NOTIFY_STARTED) {
    const MHD_ConnectionInfo* info = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context = server->watch().opened(info ? info->connect_fd : -1);
  } else if (*socket_context) {
    server->watch().closed(static_cast<ConnectionWatch::Conn*>(*socket_context));
    *socket_context = nullptr;
  }
}

// Probes and scrapes come many times a second from gateways: logged at debug, not info.
bool quiet_route(const std::string& url) { return url == "/health" || url == "/ready" || url == "/metrics"; }

}  // namespace

HttpServer::HttpServer(ServiceState& state, HttpOptions options)
    : state_(state), options_(std::move(options)), watch_(options_.limits),
      workers_(options_.workers) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::start(const std::string& host, int port) {
  const std::string where = host + ":" + std::to_string(port);
  BindAddress bind = resolve_bind_address(host, port);
  const bool tls = !options_.tls_cert_pem.empty();
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    throw std::runtime_error("this libmicrohttpd has no TLS: serve the HTTP API behind a TLS proxy");
  int bound_port = 0;
  const int fd = listen_socket(bind, where, &bound_port);
  const unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | (bind.v6 ? MHD_USE_IPv6 : 0) |
                         (tls ? MHD_USE_TLS : 0);
  std::vector<MHD_OptionItem> opts = {
      {MHD_OPTION_LISTEN_SOCKET, fd, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, kMaxConnections, nullptr},
      {MHD_OPTION_PER_IP_CONNECTION_LIMIT, options_.max_connections_per_client, nullptr},
      // Inactivity: a reply its client does not read. Arrival is the watch's (header/body deadlines).
      {MHD_OPTION_CONNECTION_TIMEOUT, options_.idle_timeout_s, nullptr},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&on_completed), this},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&on_connection), this},
  };
  if (tls) {  // the same certificate and key as gRPC (server.tls_cert_file, server.tls_key_file)
    opts.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(options_.tls_cert_pem.c_str())});
    opts.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(options_.tls_key_pem.c_str())});
  }
  opts.push_back({MHD_OPTION_END, 0, nullptr});
  daemon_ = MHD_start_daemon(flags, 0, nullptr, nullptr, &on_request, this, MHD_OPTION_ARRAY, opts.data(),
                             MHD_OPTION_END);
  if (!daemon_) {
    close(fd);
    throw std::runtime_error("cannot serve on " + where + (tls ? " (is the certificate good?)" : ""));
  }
  watch_.start();
  return bound_port;
}

void HttpServer::stop() {
  // The workers first: each resumes the connection it holds, so none is left suspended.
  workers_.stop();
  watch_.stop();
  if (daemon_) MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

void HttpServer::finished(Call& call) {
  if (call.inspection) {
    {
      std::lock_guard lock(call.inspection->mu);
      call.inspection->connection = nullptr;
    }
    call.job->cancel();  // nothing if it is done
    call.slot.release();
  }
  if (call.registered) state_.request_ids().remove(call.tenant, call.request_id);
  call.registered = false;
  if (!call.stream) return;
  call.stream->detach();
  // The client went away before the end: the request stops at the next step, its blocks freed.
  if (!call.stream->done()) state_.engine().cancel(call.engine_id);
  const std::optional<Completion> c = call.stream->completion();
  const ServiceStatus st = call.stream->status();
  spdlog::info("request {} done (http {}): prompt {} tokens, output {} tokens, ttft {:.3f} s, total {:.3f} s, {} ({})",
               log_escape(call.request_id), log_escape(call.url), c ? c->prompt_tokens : 0,
               c ? c->completion_tokens : 0, c ? c->time_to_first_token_s : 0.0,
               std::chrono::duration<double>(Clock::now() - call.started).count(),
               c ? finish_reason_name(c->reason) : "client gone", st.ok() ? "OK" : log_escape(st.message));
}

bool HttpServer::reply_logged(MHD_Connection* c, Call& call, unsigned status, const std::string& body) {
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - call.started).count();
  const std::string id = call.tenant.empty() ? std::string("-") : log_escape(call.tenant);
  if (quiet_route(call.url))
    spdlog::debug("http {} {} {} {:.1f} ms", log_escape(call.method), log_escape(call.url), status, ms);
  else
    spdlog::info("http {} {} {} {:.1f} ms (tenant {})", log_escape(call.method), log_escape(call.url), status, ms, id);
  return reply(c, status, "application/json", body) == MHD_YES;
}

bool HttpServer::refuse(MHD_Connection* c, Call& call, const ServiceStatus& s) {
  const RouteOutcome error = error_outcome(s);
  return reply_logged(c, call, error.status, error.body);
}

bool HttpServer::handle(MHD_Connection* c, Call& call) {
  // A parked non-streamed completion, resumed by its final event.
  if (call.stream && !call.streaming) {
    if (!call.stream->done()) return call.stream->park_unless_done() || handle(c, call);
    const auto [status, body] = call.stream->whole_reply();
    return reply(c, status, "application/json", body) == MHD_YES;
  }
  // A parked head-importance call, resumed by its answer.
  if (call.inspection) {
    unsigned status;
    std::string body;
    {
      std::lock_guard lock(call.inspection->mu);
      if (!call.inspection->done) return true;  // a spurious resume: still the job's
      status = call.inspection->status;
      body = std::move(call.inspection->body);
    }
    return reply_logged(c, call, status, body);
  }
  // A POST the workers have answered.
  if (call.working) {
    RouteOutcome out;
    {
      std::lock_guard lock(call.mu);
      if (!call.ready) return true;  // a spurious resume: still theirs
      out = std::move(call.outcome);
      call.working = false;
    }
    if (out.head_importance) return start_head_importance(c, call, std::move(*out.head_importance));
    if (!out.completion) return reply_logged(c, call, out.status, out.body);
    if (state_.shutting_down()) return refuse(c, call, {ServiceCode::kUnavailable, "the server is shutting down"});
    return start_completion(c, call, std::move(*out.completion), out.chat);
  }
  if (call.too_big || static_cast<int64_t>(call.body.size()) > options_.max_body_bytes)
    return reply_logged(c, call, 413,
                        json_text(openai_error({ServiceCode::kInvalidArgument,
                                                "body: larger than " + std::to_string(options_.max_body_bytes) + " bytes"})));
  const char* authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  std::optional<std::string_view> header;
  if (authorization) header = std::string_view(authorization);
  const std::optional<std::string> tenant = state_.auth().tenant(header);
  if (tenant) call.tenant = *tenant;
  const std::string& url = call.url;
  const bool get = call.method == "GET" || call.method == "HEAD", post = call.method == "POST";

  if (url == "/health") {
    if (!get) return reply(c, 405, "text/plain", "method not allowed: use GET\n") == MHD_YES;
    return (state_.shutting_down() ? reply(c, 503, "text/plain", "draining\n") : reply(c, 200, "text/plain", "ok\n")) == MHD_YES;
  }
  // Readiness (Kubernetes' readinessProbe, a balancer's health check): unready from the moment
  // draining starts, while the streams still run, so that no new request is sent here.
  if (url == "/ready") {
    if (!get) return reply(c, 405, "text/plain", "method not allowed: use GET\n") == MHD_YES;
    return (state_.shutting_down() ? reply(c, 503, "text/plain", "draining\n") : reply(c, 200, "text/plain", "ready\n")) == MHD_YES;
  }
  if (url == "/metrics") {
    if (options_.metrics_auth && !tenant)
      return reply_error(c, {ServiceCode::kUnauthenticated, std::string(BearerAuth::kUnauthenticatedMessage)}) == MHD_YES;
    return reply(c, 200, "text/plain; version=0.0.4", state_.metrics().render(state_.engine().stats(), state_.engine().model_info())) == MHD_YES;
  }
  if (!tenant)
    return refuse(c, call, {ServiceCode::kUnauthenticated, std::string(BearerAuth::kUnauthenticatedMessage)});
  if (url == "/v1/models" || url.rfind("/v1/models/", 0) == 0) {
    if (!get) return reply(c, 405, "text/plain", "method not allowed: use GET\n") == MHD_YES;
    const json model = {{"id", options_.model_ids.front()}, {"object", "model"}, {"created", 0},
                        {"owned_by", "kvserve"}, {"max_model_len", state_.engine().model_info().max_model_len}};
    if (url == "/v1/models") return reply_logged(c, call, 200, json_text({{"object", "list"}, {"data", json::array({model})}}));
    // GET /v1/models/{id}: the model under any name it answers to.
    const std::string id = url.substr(std::string("/v1/models/").size());
    if (std::find(options_.model_ids.begin(), options_.model_ids.end(), id) == options_.model_ids.end())
      return refuse(c, call, {ServiceCode::kNotFound, "model: '" + log_escape(id) + "' is not served here"});
    return reply_logged(c, call, 200, json_text(model));
  }
  if (!is_post_route(url))
    return refuse(c, call, {ServiceCode::kNotFound, "url: no such endpoint: " + log_escape(url)});
  if (!post) return reply(c, 405, "text/plain", "method not allowed: use POST\n") == MHD_YES;
  const bool completion = url == "/v1/completions" || url == "/v1/chat/completions";
  if (completion && state_.shutting_down())
    return refuse(c, call, {ServiceCode::kUnavailable, "the server is shutting down"});
  // Parsing, validating and tokenizing run on a worker: a megabyte prompt must not stall the
  // connection thread that every other client shares.
  call.working = true;
  MHD_suspend_connection(c);
  workers_.post([this, &call, c] {
    const ModelInfo& m = state_.engine().model_info();
    RouteContext ctx{state_.engine().tokenizer(), state_.engine().chat_template(), options_.model_ids, m.max_model_len,
                     m.max_request_tokens};
    ctx.abort = [this, &call](const std::string& id) { return state_.abort(call.tenant, id); };
    ctx.inspect_max_tokens = state_.inspect_max_tokens();
    RouteOutcome out = answer_post(call.url, call.body, ctx);
    {
      std::lock_guard lock(call.mu);
      call.outcome = std::move(out);
      call.ready = true;
      call.body.clear();
      call.body.shrink_to_fit();
    }
    MHD_resume_connection(c);
  });
  return true;
}

bool HttpServer::start_head_importance(MHD_Connection* c, Call& call, HeadImportanceInput in) {
  if (state_.shutting_down()) return refuse(c, call, {ServiceCode::kUnavailable, "the server is shutting down"});
  if (ServiceStatus st = call.slot.take(state_); !st.ok()) return refuse(c, call, st);
  auto reply = std::make_shared<InspectionReply>();
  reply->connection = c;
  // The slot goes back before the answer is sent, so the client's next call finds it free.
  InspectionSlot* slot = &call.slot;
  auto job = std::make_shared<HeadImportanceJob>(
      state_, inspection_request(std::move(in.prompt), 0),
      [reply, slot](const ServiceStatus& st, HeadImportanceResult& r) {
        MHD_Connection* resume = nullptr;
        {
          std::lock_guard lock(reply->mu);
          if (st.ok()) {
            reply->body = json_text(head_importance_json(r));
          } else {
            const RouteOutcome error = error_outcome(st);
            reply->status = error.status;
            reply->body = error.body;
          }
          reply->done = true;
          resume = reply->connection;
          if (resume) slot->release();
        }
        if (resume) MHD_resume_connection(resume);
      });
  call.inspection = reply;
  call.job = job;
  MHD_suspend_connection(c);
  // A client that goes away cancels the work; its engine requests stop at the next step.
  if (call.conn) watch_.watch_reply(call.conn, [job] { job->cancel(); });
  job->start(in.loss_budget);
  return true;
}

bool HttpServer::start_completion(MHD_Connection* c, Call& call, CompletionCall cc, bool chat) {
  // The client's X-Request-Id (as vLLM takes it), else one nobody can guess; either is live in
  // the registry until the reply ends, so POST /abort or gRPC Abort can end it.
  std::string id;
  const char* given = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Request-Id");
  if (given) {
    id = given;
    if (std::string err = check_request_id(id, "x-request-id"); !err.empty())
      return refuse(c, call, {ServiceCode::kInvalidArgument, err});
  } else {
    id = random_request_id();
  }
  const std::string& tenant = call.tenant;
  if (!state_.request_ids().add(tenant, id))
    return refuse(c, call, {ServiceCode::kAlreadyExists, "x-request-id: a request with this id is already running"});
  call.request_id = id;
  call.registered = true;
  cc.request.client_id = (tenant.empty() ? "" : tenant + "/") + id;
  // Tenants never share prefix-cache blocks (the request's own cache_salt partitions further).
  if (!tenant.empty()) cc.request.cache_salt = tenant + '\x1f' + cc.request.cache_salt;
  const int64_t created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto stream = std::make_shared<CompletionStream>(
      CompletionWriter((chat ? "chatcmpl-" : "cmpl-") + (given ? id : id.substr(4)), options_.model_ids.front(),
                       created, state_.engine().tokenizer(), cc.logprobs, chat, cc.answer, cc.parallel_tool_calls),
      cc.stream, cc.include_usage, state_);
  stream->attach(c);
  const SubmitResult r = state_.engine().submit(std::move(cc.request), stream);
  if (!r.ok()) {
    ServiceStatus s = submit_status(r);
    s.message = openai_field_message(s.message);
    // The engine names its own field; the client sent one of several.
    if (const std::string k = "sampling.constraint"; s.message.compare(0, k.size(), k) == 0)
      s.message = cc.constraint_field + s.message.substr(k.size());
    return refuse(c, call, s);
  }
  state_.request_ids().set_engine_id(tenant, id, r.id);
  call.stream = stream;
  call.engine_id = r.id;
  call.streaming = cc.stream;
  if (!cc.stream) {
    // A whole reply waits parked; if its client closes meanwhile, the generation is cancelled.
    if (call.conn) watch_.watch_reply(call.conn, [engine = &state_.engine(), eid = r.id] { engine->cancel(eid); });
    return stream->park_unless_done() || handle(c, call);
  }
  MHD_Response* resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, &read_stream, stream.get(), nullptr);
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  MHD_add_response_header(resp, "x-request-id", id.c_str());
  const MHD_Result result = MHD_queue_response(c, 200, resp);
  MHD_destroy_response(resp);
  return result == MHD_YES;
}

}  // namespace kvserve
