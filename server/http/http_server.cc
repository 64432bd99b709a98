#include "http/http_server.h"

#include <microhttpd.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/log_text.h"
#include "core/request_input.h"
#include "core/service_status.h"
#include "core/request_ids.h"
#include "http/mhd_address.h"
#include "http/openai_api.h"

namespace kvserve {
namespace {

using nlohmann::json;

// One running completion: the engine's sink. Events arrive on the engine's loop thread; the
// connection is parked (suspended) while there is nothing to send, and each event resumes it.
class CompletionStream final : public ResultSink {
 public:
  CompletionStream(CompletionWriter writer, bool stream, bool include_usage, ServerMetrics& metrics)
      : writer_(std::move(writer)), stream_(stream), include_usage_(include_usage), server_metrics_(metrics),
        stream_metrics_(metrics) {}

  void on_event(Event event) override {
    MHD_Connection* resume = nullptr;
    {
      std::lock_guard lock(mu_);
      stream_metrics_.observe(event);
      if (stream_)
        pending_ += writer_.stream_event(event, include_usage_);
      else
        writer_.add(event);
      if (event.completion) {
        done_ = true;
        server_metrics_.observe_completion(*event.completion);
      }
      if (suspended_ && connection_) {
        suspended_ = false;
        resume = connection_;
      }
    }
    if (resume) MHD_resume_connection(resume);
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
  json body() const {
    std::lock_guard lock(mu_);
    return writer_.body();
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
  ServerMetrics& server_metrics_;
  StreamMetrics stream_metrics_;
  std::string pending_;
  bool done_ = false, suspended_ = false;
  MHD_Connection* connection_ = nullptr;
};

}  // namespace

struct HttpServer::Call {
  std::string method, url, body;
  bool too_big = false;
  bool answered = false;
  std::shared_ptr<CompletionStream> stream;
  uint64_t engine_id = 0;
  bool streaming = false;
};

namespace {

MHD_Result reply(MHD_Connection* c, unsigned status, const std::string& content_type, const std::string& body) {
  MHD_Response* r = MHD_create_response_from_buffer(body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type.c_str());
  if (status == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
  const MHD_Result result = MHD_queue_response(c, status, r);
  MHD_destroy_response(r);
  return result;
}

MHD_Result reply_json(MHD_Connection* c, unsigned status, const json& body) {
  return reply(c, status, "application/json", body.dump());
}

MHD_Result reply_error(MHD_Connection* c, const ServiceStatus& s) {
  return reply_json(c, http_status_of(s.code), openai_error(s));
}

ssize_t read_stream(void* cls, uint64_t, char* buf, size_t max) {
  return static_cast<CompletionStream*>(cls)->read(buf, max);
}

MHD_Result on_request(void* cls, MHD_Connection* c, const char* url, const char* method, const char*,
                      const char* upload, size_t* upload_size, void** state) {
  auto* server = static_cast<HttpServer*>(cls);
  if (*state == nullptr) {
    auto* call = new HttpServer::Call;
    call->method = method;
    call->url = url;
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
      } else {
        call.body.append(upload, *upload_size);
      }
    }
    *upload_size = 0;
    return MHD_YES;
  }
  return server->handle(c, call) ? MHD_YES : MHD_NO;
}

void on_completed(void* cls, MHD_Connection*, void** state, MHD_RequestTerminationCode) {
  if (!*state) return;
  auto* call = static_cast<HttpServer::Call*>(*state);
  static_cast<HttpServer*>(cls)->finished(*call);
  delete call;
  *state = nullptr;
}

}  // namespace

HttpServer::HttpServer(Engine& engine, const BearerAuth& auth, ServerMetrics& metrics, HttpOptions options)
    : engine_(engine), auth_(auth), metrics_(metrics), options_(std::move(options)) {}

HttpServer::~HttpServer() { stop(); }

int HttpServer::start(const std::string& host, int port) {
  BindAddress bind = resolve_bind_address(host, port);
  const bool tls = !options_.tls_cert_pem.empty();
  if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    throw std::runtime_error("this libmicrohttpd has no TLS: serve the HTTP API behind a TLS proxy");
  const unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | (bind.v6 ? MHD_USE_IPv6 : 0) |
                         (tls ? MHD_USE_TLS : 0);
  std::vector<MHD_OptionItem> opts = {
      {MHD_OPTION_SOCK_ADDR, 0, &bind.addr},
      {MHD_OPTION_CONNECTION_LIMIT, kMaxConnections, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, 300, nullptr},  // idle keep-alive connections
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&on_completed), this},
      {MHD_OPTION_LISTENING_ADDRESS_REUSE, 0, nullptr},  // SO_REUSEADDR only: no shared port
  };
  if (tls) {  // the same certificate and key as gRPC (server.tls_cert_file, server.tls_key_file)
    opts.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, const_cast<char*>(options_.tls_cert_pem.c_str())});
    opts.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, const_cast<char*>(options_.tls_key_pem.c_str())});
  }
  opts.push_back({MHD_OPTION_END, 0, nullptr});
  daemon_ = MHD_start_daemon(flags, static_cast<uint16_t>(port), nullptr, nullptr, &on_request, this, MHD_OPTION_ARRAY,
                             opts.data(), MHD_OPTION_END);
  if (!daemon_)
    throw std::runtime_error("cannot listen on " + host + ":" + std::to_string(port) +
                             " (in use, or not an address of this host" + (tls ? ", or the certificate is bad" : "") + ")");
  const MHD_DaemonInfo* info = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
  return info ? info->port : port;
}

void HttpServer::stop() {
  if (daemon_) MHD_stop_daemon(daemon_);
  daemon_ = nullptr;
}

void HttpServer::finished(Call& call) {
  if (!call.stream) return;
  call.stream->detach();
  // The client went away before the end: the request stops at the next step, its blocks freed.
  if (!call.stream->done()) engine_.cancel(call.engine_id);
}

bool HttpServer::handle(MHD_Connection* c, Call& call) {
  // A parked non-streamed completion, resumed by its final event.
  if (call.stream && !call.streaming) {
    if (!call.stream->done()) return call.stream->park_unless_done() || handle(c, call);
    return reply_json(c, 200, call.stream->body()) == MHD_YES;
  }
  if (call.too_big || static_cast<int64_t>(call.body.size()) > options_.max_body_bytes)
    return reply_json(c, 413,
                      openai_error({ServiceCode::kInvalidArgument,
                                    "body: larger than " + std::to_string(options_.max_body_bytes) + " bytes"})) ==
           MHD_YES;
  const char* authorization = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  std::optional<std::string_view> header;
  if (authorization) header = std::string_view(authorization);
  const std::optional<std::string> tenant = auth_.tenant(header);
  const std::string& url = call.url;
  const bool get = call.method == "GET" || call.method == "HEAD", post = call.method == "POST";

  if (url == "/health") {
    if (!get) return reply(c, 405, "text/plain", "method not allowed: use GET\n") == MHD_YES;
    return (draining_ ? reply(c, 503, "text/plain", "draining\n") : reply(c, 200, "text/plain", "ok\n")) == MHD_YES;
  }
  if (url == "/metrics") {
    if (options_.metrics_auth && !tenant)
      return reply_error(c, {ServiceCode::kUnauthenticated, std::string(BearerAuth::kUnauthenticatedMessage)}) == MHD_YES;
    return reply(c, 200, "text/plain; version=0.0.4", metrics_.render(engine_.stats())) == MHD_YES;
  }
  if (!tenant)
    return reply_error(c, {ServiceCode::kUnauthenticated, std::string(BearerAuth::kUnauthenticatedMessage)}) == MHD_YES;
  if (url == "/v1/models") {
    if (!get) return reply(c, 405, "text/plain", "method not allowed: use GET\n") == MHD_YES;
    const json model = {{"id", options_.model_ids.front()}, {"object", "model"}, {"created", 0},
                        {"owned_by", "kvserve"}, {"max_model_len", engine_.model_info().max_model_len}};
    return reply_json(c, 200, {{"object", "list"}, {"data", json::array({model})}}) == MHD_YES;
  }
  const bool known = url == "/v1/completions" || url == "/v1/chat/completions" || url == "/tokenize" ||
                     url == "/detokenize" || url == "/apply-template";
  if (!known) return reply_error(c, {ServiceCode::kNotFound, "url: no such endpoint: " + log_escape(url)}) == MHD_YES;
  if (!post) return reply(c, 405, "text/plain", "method not allowed: use POST\n") == MHD_YES;
  json body;
  try {
    body = json::parse(call.body);
  } catch (const json::parse_error& e) {
    return reply_error(c, {ServiceCode::kInvalidArgument, std::string("body: not valid JSON: ") + e.what()}) == MHD_YES;
  }
  const Tokenizer& tok = engine_.tokenizer();
  if (url == "/tokenize") {
    if (!body.is_object() || !body.contains("prompt") || !body["prompt"].is_string())
      return reply_error(c, {ServiceCode::kInvalidArgument, "prompt: required, a string"}) == MHD_YES;
    std::vector<int32_t> ids;
    const bool add_special = !body.contains("add_special") || body["add_special"] == true;
    const ServiceStatus st = resolve_prompt(body["prompt"].get<std::string>(), {}, tok, &ids);
    if (!st.ok()) return reply_error(c, st) == MHD_YES;
    if (!add_special && !ids.empty() && tok.adds_bos() && ids.front() == tok.bos_id()) ids.erase(ids.begin());
    return reply_json(c, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", engine_.model_info().max_model_len}}) ==
           MHD_YES;
  }
  if (url == "/detokenize") {
    if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
      return reply_error(c, {ServiceCode::kInvalidArgument, "tokens: required, an array of token ids"}) == MHD_YES;
    std::vector<int32_t> ids;
    for (const json& t : body["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= tok.vocab_size())
        return reply_error(c, {ServiceCode::kInvalidArgument, "tokens: " + t.dump() + " is not a token id"}) == MHD_YES;
      ids.push_back(t.get<int32_t>());
    }
    return reply_json(c, 200, {{"prompt", tok.decode(ids)}}) == MHD_YES;
  }
  if (url == "/apply-template") {
    std::string prompt;
    const ServiceStatus st = apply_template(body, engine_.chat_template(), &prompt);
    if (!st.ok()) return reply_error(c, st) == MHD_YES;
    return reply_json(c, 200, {{"prompt", prompt}}) == MHD_YES;
  }
  if (draining_) return reply_error(c, {ServiceCode::kUnavailable, "the server is shutting down"}) == MHD_YES;
  call.body.clear();
  return start_completion(c, call, body, *tenant, url == "/v1/chat/completions");
}

bool HttpServer::start_completion(MHD_Connection* c, Call& call, const json& body, const std::string& tenant,
                                  bool chat) {
  CompletionCall cc;
  ServiceStatus st = chat ? parse_chat_request(body, engine_.tokenizer(), options_.model_ids, engine_.chat_template(),
                                               engine_.model_info().max_model_len, &cc)
                          : parse_completion_request(body, engine_.tokenizer(), options_.model_ids, &cc);
  if (!st.ok()) return reply_error(c, st) == MHD_YES;
  std::string id = random_request_id();
  cc.request.client_id = (tenant.empty() ? "" : tenant + "/") + id;
  const int64_t created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto stream = std::make_shared<CompletionStream>(
      CompletionWriter((chat ? "chatcmpl-" : "cmpl-") + id.substr(4), options_.model_ids.front(), created,
                       engine_.tokenizer(), cc.logprobs, chat),
      cc.stream, cc.include_usage, metrics_);
  stream->attach(c);
  const SubmitResult r = engine_.submit(std::move(cc.request), stream);
  if (!r.ok()) {
    ServiceStatus s = submit_status(r);
    s.message = openai_field_message(s.message);
    return reply_error(c, s) == MHD_YES;
  }
  call.stream = stream;
  call.engine_id = r.id;
  call.streaming = cc.stream;
  if (!cc.stream) return stream->park_unless_done() || handle(c, call);
  MHD_Response* resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, &read_stream, stream.get(), nullptr);
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  MHD_add_response_header(resp, "x-request-id", id.c_str());
  const MHD_Result result = MHD_queue_response(c, 200, resp);
  MHD_destroy_response(resp);
  return result == MHD_YES;
}

}  // namespace kvserve
