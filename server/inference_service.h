// The kvserve.v1.Inference service on gRPC's callback API. Generate gets one reactor per stream
// (generate_stream.h), each inspection call one reactor (inspect_calls.h); the other RPCs answer
// at once from the engine.
#pragma once

#include <string>

#include "core/service_state.h"
#include "kvserve.grpc.pb.h"

namespace kvserve {

class InferenceService final : public v1::Inference::CallbackService {
 public:
  // state: what both front ends share (server/core/service_state.h); it outlives the service.
  explicit InferenceService(ServiceState& state) : state_(state) {}

  // OK with the caller's tenant in *tenant, or UNAUTHENTICATED when tokens are configured and
  // the call carries none of them.
  grpc::Status authorize(const grpc::CallbackServerContext* ctx, std::string* tenant = nullptr) const;

  grpc::ServerWriteReactor<v1::GenerateResponse>* Generate(grpc::CallbackServerContext* ctx,
                                                           const v1::GenerateRequest* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* ctx, const v1::TokenizeRequest* request,
                                     v1::TokenizeResponse* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* ctx, const v1::GetModelInfoRequest* request,
                                         v1::GetModelInfoResponse* response) override;
  grpc::ServerUnaryReactor* GetStats(grpc::CallbackServerContext* ctx, const v1::GetStatsRequest* request,
                                     v1::GetStatsResponse* response) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* ctx, const v1::AbortRequest* request,
                                  v1::AbortResponse* response) override;
  grpc::ServerUnaryReactor* InspectAttention(grpc::CallbackServerContext* ctx,
                                             const v1::InspectAttentionRequest* request,
                                             v1::InspectAttentionResponse* response) override;
  grpc::ServerUnaryReactor* HeadImportance(grpc::CallbackServerContext* ctx, const v1::HeadImportanceRequest* request,
                                           v1::HeadImportanceResponse* response) override;

  // The shared state, under the names the reactors use.
  ServiceState& state() { return state_; }
  Engine& engine() { return state_.engine(); }
  const BearerAuth& auth() const { return state_.auth(); }
  ServerMetrics& metrics() { return state_.metrics(); }
  RequestRegistry& request_ids() { return state_.request_ids(); }
  int32_t inspect_max_tokens() const { return state_.inspect_max_tokens(); }
  bool shutting_down() const { return state_.shutting_down(); }
  void stream_started() { state_.stream_started(); }
  void stream_done() { state_.stream_done(); }

 private:
  ServiceState& state_;
};

}  // namespace kvserve
