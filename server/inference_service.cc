#include "inference_service.h"

#include "generate_stream.h"
#include "inspect_calls.h"
#include "proto_convert.h"
#include "utf8.h"

namespace kvserve {
namespace {

// Compares without an early exit, so response time does not reveal how much of a token matched.
bool same(const std::string& a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

grpc::Status InferenceService::authorize(const grpc::CallbackServerContext* ctx) const {
  if (tokens_.empty()) return grpc::Status::OK;
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it != md.end()) {
    const std::string_view value(it->second.data(), it->second.size());
    constexpr std::string_view kBearer = "Bearer ";
    if (value.substr(0, kBearer.size()) == kBearer) {
      bool ok = false;
      for (const auto& t : tokens_) ok |= same(t, value.substr(kBearer.size()));
      if (ok) return grpc::Status::OK;
    }
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "authorization: a valid bearer token is required");
}

// Answers a unary call with `status` if it is not OK (the caller then returns the reactor).
#define KVSERVE_AUTHORIZE_UNARY(ctx)                           \
  if (grpc::Status auth = authorize(ctx); !auth.ok()) {        \
    auto* reactor = (ctx)->DefaultReactor();                   \
    reactor->Finish(auth);                                     \
    return reactor;                                            \
  }

grpc::ServerWriteReactor<v1::GenerateResponse>* InferenceService::Generate(grpc::CallbackServerContext* ctx,
                                                                           const v1::GenerateRequest* request) {
  return new GenerateStream(*this, ctx, request);  // deletes itself in OnDone
}

grpc::ServerUnaryReactor* InferenceService::InspectAttention(grpc::CallbackServerContext* ctx,
                                                             const v1::InspectAttentionRequest* request,
                                                             v1::InspectAttentionResponse* response) {
  return new InspectAttentionCall(*this, ctx, request, response);  // deletes itself in OnDone
}

grpc::ServerUnaryReactor* InferenceService::HeadImportance(grpc::CallbackServerContext* ctx,
                                                           const v1::HeadImportanceRequest* request,
                                                           v1::HeadImportanceResponse* response) {
  return new HeadImportanceCall(*this, ctx, request, response);  // deletes itself in OnDone
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* ctx,
                                                     const v1::TokenizeRequest* request,
                                                     v1::TokenizeResponse* response) {
  KVSERVE_AUTHORIZE_UNARY(ctx)
  auto* reactor = ctx->DefaultReactor();
  const Tokenizer& tok = engine_.tokenizer();
  if (!utf8_is_valid(request->text())) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "text: not valid UTF-8"));
    return reactor;
  }
  for (int32_t id : tok.encode(request->text(), request->has_add_bos() ? request->add_bos() : true)) {
    response->add_token_ids(id);
    response->add_pieces(tok.token_text(id));
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::GetModelInfo(grpc::CallbackServerContext* ctx,
                                                         const v1::GetModelInfoRequest*,
                                                         v1::GetModelInfoResponse* response) {
  KVSERVE_AUTHORIZE_UNARY(ctx)
  to_proto(engine_.model_info(), engine_.options(), response);
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::GetStats(grpc::CallbackServerContext* ctx, const v1::GetStatsRequest*,
                                                     v1::GetStatsResponse* response) {
  KVSERVE_AUTHORIZE_UNARY(ctx)
  to_proto(engine_.stats(), response);
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Abort(grpc::CallbackServerContext* ctx, const v1::AbortRequest* request,
                                                  v1::AbortResponse* response) {
  KVSERVE_AUTHORIZE_UNARY(ctx)
  uint64_t engine_id = 0;
  {
    std::lock_guard<std::mutex> lock(ids_mu_);
    auto it = live_ids_.find(request->request_id());
    if (it != live_ids_.end()) engine_id = it->second;
  }
  if (engine_id) engine_.cancel(engine_id);
  response->set_found(engine_id != 0);
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

bool InferenceService::register_id(const std::string& request_id, uint64_t engine_id) {
  std::lock_guard<std::mutex> lock(ids_mu_);
  return live_ids_.emplace(request_id, engine_id).second;
}

void InferenceService::set_engine_id(const std::string& request_id, uint64_t engine_id) {
  std::lock_guard<std::mutex> lock(ids_mu_);
  live_ids_[request_id] = engine_id;
}

void InferenceService::unregister_id(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(ids_mu_);
  live_ids_.erase(request_id);
}

}  // namespace kvserve

namespace kvserve {

void InferenceService::stream_started() {
  std::lock_guard<std::mutex> lock(streams_mu_);
  ++live_streams_;
}

void InferenceService::stream_done() {
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    --live_streams_;
  }
  streams_cv_.notify_all();
}

bool InferenceService::wait_streams_done(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(streams_mu_);
  return streams_cv_.wait_for(lock, timeout, [&] { return live_streams_ == 0; });
}

}  // namespace kvserve
