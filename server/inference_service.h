// The kvserve.v1.Inference service on gRPC's callback API. Generate gets one reactor per stream
// (generate_stream.h), each inspection call one reactor (inspect_calls.h); the other RPCs answer
// at once from the engine.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "core/bearer_auth.h"
#include "core/request_ids.h"
#include "runtime/engine.h"
#include "kvserve.grpc.pb.h"
#include "core/metrics.h"

namespace kvserve {

class InferenceService final : public v1::Inference::CallbackService {
 public:
  // auth: the accepted bearer tokens (none = no authentication).
  // inspect_max_tokens: longest prompt the inspection RPCs take.
  // max_inspect_calls: inspection calls running at once.
  InferenceService(Engine& engine, BearerAuth auth, int32_t inspect_max_tokens, int32_t max_inspect_calls = 4)
      : engine_(engine), auth_(std::move(auth)), inspect_max_tokens_(inspect_max_tokens),
        max_inspect_calls_(max_inspect_calls) {}

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
  int32_t inspect_max_tokens() const { return inspect_max_tokens_; }
  // A slot for one inspection call (false: server.max_inspect_calls are running); end_inspection
  // gives it back.
  bool begin_inspection();
  void end_inspection() { --inspect_calls_; }
  int32_t max_inspect_calls() const { return max_inspect_calls_; }

  // From now on, cancelled streams end with UNAVAILABLE ("shutting down").
  void begin_shutdown() { shutting_down_ = true; }
  bool shutting_down() const { return shutting_down_; }

  Engine& engine() { return engine_; }
  const BearerAuth& auth() const { return auth_; }
  ServerMetrics& metrics() { return metrics_; }
  // Request ids of live streams by tenant, for Abort.
  RequestRegistry& request_ids() { return request_ids_; }

  // Live Generate streams, so shutdown can wait for the last final message to be written.
  void stream_started();
  void stream_done();
  bool wait_streams_done(std::chrono::milliseconds timeout);

 private:
  Engine& engine_;
  BearerAuth auth_;
  int32_t inspect_max_tokens_;
  int32_t max_inspect_calls_;
  std::atomic<int32_t> inspect_calls_ = 0;
  ServerMetrics metrics_;
  std::atomic<bool> shutting_down_ = false;
  RequestRegistry request_ids_;
  std::mutex streams_mu_;
  std::condition_variable streams_cv_;
  int64_t live_streams_ = 0;
};

}  // namespace kvserve
