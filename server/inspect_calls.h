// The two inspection RPCs as callback reactors. InspectAttention runs its engine requests through
// an EngineFanOut, HeadImportance through the transport-neutral HeadImportanceJob; each answers
// when they are all done, and cancelling the call cancels them.
#pragma once

#include <memory>

#include "core/engine_fan_out.h"
#include "core/head_importance.h"
#include "core/inspection.h"
#include "inference_service.h"

namespace kvserve {

class InspectAttentionCall : public grpc::ServerUnaryReactor {
 public:
  InspectAttentionCall(InferenceService& service, grpc::CallbackServerContext* ctx,
                       const v1::InspectAttentionRequest* request, v1::InspectAttentionResponse* response);
  void OnCancel() override;
  void OnDone() override;

 private:
  void answer(std::vector<Completion>& done);
  void add_matrices(const AttentionCapture& a);
  void finish(const grpc::Status& status);  // the slot back, then Finish

  InferenceService& service_;
  v1::InspectAttentionResponse* response_;
  std::shared_ptr<EngineFanOut> fan_out_;
  InspectionSlot slot_;
  std::vector<int32_t> prompt_ids_;
  enum class Matrices { kFitting, kFloat, kNone };  // see include_matrices in the proto
  Matrices matrices_ = Matrices::kFitting;
  int32_t period_ = 0;
};

class HeadImportanceCall : public grpc::ServerUnaryReactor {
 public:
  HeadImportanceCall(InferenceService& service, grpc::CallbackServerContext* ctx,
                     const v1::HeadImportanceRequest* request, v1::HeadImportanceResponse* response);
  void OnCancel() override;
  void OnDone() override;

 private:
  void answer(const ServiceStatus& status, HeadImportanceResult& result);
  void finish(const grpc::Status& status);  // the slot back, then Finish

  InferenceService& service_;
  v1::HeadImportanceResponse* response_;
  std::mutex mu_;
  std::shared_ptr<HeadImportanceJob> job_;  // the workflow (server/core/head_importance.h)
  InspectionSlot slot_;
};

}  // namespace kvserve
