// The kvserve.v1.Inference service on gRPC's callback API. Generate gets one reactor per stream
// (generate_stream.h), each inspection call one reactor (inspect_calls.h); the other RPCs answer
// at once from the engine.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine.h"
#include "kvserve.grpc.pb.h"
#include "metrics.h"

namespace kvserve {

class InferenceService final : public v1::Inference::CallbackService {
 public:
  // tokens: accepted bearer tokens; empty = no authentication.
  // inspect_max_tokens: longest prompt the inspection RPCs take.
  InferenceService(Engine& engine, std::vector<std::string> tokens, int32_t inspect_max_tokens)
      : engine_(engine), tokens_(std::move(tokens)), inspect_max_tokens_(inspect_max_tokens) {}

  // OK, or UNAUTHENTICATED when tokens are configured and the call carries none of them.
  grpc::Status authorize(const grpc::CallbackServerContext* ctx) const;

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

  // From now on, cancelled streams end with UNAVAILABLE ("shutting down").
  void begin_shutdown() { shutting_down_ = true; }
  bool shutting_down() const { return shutting_down_; }

  Engine& engine() { return engine_; }
  ServerMetrics& metrics() { return metrics_; }
  // Request ids of live streams, for Abort. register_id fails if the id is already live.
  bool register_id(const std::string& request_id, uint64_t engine_id);
  void set_engine_id(const std::string& request_id, uint64_t engine_id);
  void unregister_id(const std::string& request_id);
  std::string next_request_id() { return "kvs-" + std::to_string(++counter_); }

  // Live Generate streams, so shutdown can wait for the last final message to be written.
  void stream_started();
  void stream_done();
  bool wait_streams_done(std::chrono::milliseconds timeout);

 private:
  Engine& engine_;
  std::vector<std::string> tokens_;
  int32_t inspect_max_tokens_;
  ServerMetrics metrics_;
  std::atomic<bool> shutting_down_ = false;
  std::atomic<uint64_t> counter_ = 0;
  std::mutex ids_mu_;
  std::unordered_map<std::string, uint64_t> live_ids_;
  std::mutex streams_mu_;
  std::condition_variable streams_cv_;
  int64_t live_streams_ = 0;
};

}  // namespace kvserve
