#include "inference_service.h"

#include "generate_stream.h"
#include "inspect_calls.h"
#include "proto_convert.h"
#include "text/utf8.h"

namespace kvserve {
grpc::Status InferenceService::authorize(const grpc::CallbackServerContext* ctx, std::string* tenant) const {
  std::optional<std::string_view> header;
  const auto& md = ctx->client_metadata();
  if (auto it = md.find("authorization"); it != md.end()) header = std::string_view(it->second.data(), it->second.size());
  std::optional<std::string> who = state_.auth().tenant(header);
  if (!who) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, std::string(BearerAuth::kUnauthenticatedMessage));
  if (tenant) *tenant = std::move(*who);
  return grpc::Status::OK;
}

// Answers a unary call with `status` if it is not OK (the caller then returns the reactor).
// KVSERVE_AUTHORIZE_UNARY_AS also stores the caller's tenant (a std::string*).
#define KVSERVE_AUTHORIZE_UNARY_AS(ctx, tenant)                \
  if (grpc::Status auth = authorize(ctx, tenant); !auth.ok()) { \
    auto* reactor = (ctx)->DefaultReactor();                   \
    reactor->Finish(auth);                                     \
    return reactor;                                            \
  }
#define KVSERVE_AUTHORIZE_UNARY(ctx) KVSERVE_AUTHORIZE_UNARY_AS(ctx, nullptr)

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
  const Tokenizer& tok = state_.engine().tokenizer();
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
  to_proto(state_.engine().model_info(), state_.engine().options(), response);
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::GetStats(grpc::CallbackServerContext* ctx, const v1::GetStatsRequest*,
                                                     v1::GetStatsResponse* response) {
  KVSERVE_AUTHORIZE_UNARY(ctx)
  to_proto(state_.engine().stats(), response);
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::Abort(grpc::CallbackServerContext* ctx, const v1::AbortRequest* request,
                                                  v1::AbortResponse* response) {
  std::string tenant;
  KVSERVE_AUTHORIZE_UNARY_AS(ctx, &tenant)
  auto* reactor = ctx->DefaultReactor();
  if (std::string err = check_request_id(request->request_id()); !err.empty()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, err));
    return reactor;
  }
  response->set_found(state_.abort(tenant, request->request_id()));
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace kvserve
