// The two inspection RPCs as callback reactors. Each runs its engine requests through an
// EngineFanOut and answers when they are all done; cancelling the call cancels them.
#pragma once

#include <atomic>

#include <memory>

#include "engine_fan_out.h"
#include "inference_service.h"

namespace kvserve {

// One of server.max_inspect_calls, held by a call. It is given back (once) before the call's
// status is sent, so that the client's next call never finds it still taken, and in OnDone at
// the latest.
class InspectionSlot {
 public:
  bool take(InferenceService& service);
  void release();

 private:
  InferenceService* service_ = nullptr;
  std::atomic<bool> held_{false};
};

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
  void rank(std::vector<Completion>& done);
  void measure_joint(std::vector<Completion>& done);
  void finish(const grpc::Status& status);  // the slot back, then Finish

  InferenceService& service_;
  v1::HeadImportanceResponse* response_;
  Request base_;                                // the scored request every ablation copies
  std::vector<std::vector<HeadRef>> prefixes_;  // the candidate sets measured together
  std::vector<double> estimated_;               // [k-1]: the single drops of prefix k, summed
  std::mutex mu_;
  InspectionSlot slot_;
  std::shared_ptr<EngineFanOut> fan_out_;  // the current phase: singles, then the joint check
};

}  // namespace kvserve
