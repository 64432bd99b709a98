#include "inference_service.h"

#include "generate_stream.h"
#include "proto_convert.h"
#include "utf8.h"

namespace kvserve {

grpc::ServerWriteReactor<v1::GenerateResponse>* InferenceService::Generate(grpc::CallbackServerContext* ctx,
                                                                           const v1::GenerateRequest* request) {
  return new GenerateStream(*this, ctx, request);  // deletes itself in OnDone
}

grpc::ServerUnaryReactor* InferenceService::Tokenize(grpc::CallbackServerContext* ctx,
                                                     const v1::TokenizeRequest* request,
                                                     v1::TokenizeResponse* response) {
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
  to_proto(engine_.model_info(), engine_.options(), response);
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::GetStats(grpc::CallbackServerContext* ctx, const v1::GetStatsRequest*,
                                                     v1::GetStatsResponse* response) {
  to_proto(engine_.stats(), response);
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Abort(grpc::CallbackServerContext* ctx, const v1::AbortRequest* request,
                                                  v1::AbortResponse* response) {
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
