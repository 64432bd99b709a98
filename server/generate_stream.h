// One Generate stream: adapts the engine's events for one request to a gRPC server stream.
// The engine loop hands events to a sink that only queues them (coalescing chunks while a
// write is in flight), so a slow reader never blocks the loop; one write is in flight at a time.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>

#include "inference_service.h"

namespace kvserve {

struct StreamLink;

class GenerateStream : public grpc::ServerWriteReactor<v1::GenerateResponse> {
 public:
  GenerateStream(InferenceService& service, grpc::CallbackServerContext* ctx, const v1::GenerateRequest* request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

  // Called on the engine loop thread by the stream's sink.
  void deliver(Event event);

 private:
  enum class Action { kNone, kWrite, kFinish };
  Action next_action_locked();
  void perform(Action action);
  void finish_call(const grpc::Status& status);
  void release_id();  // the request id leaves the registry (once)

  InferenceService& service_;
  std::string tenant_;      // who made the request (see BearerAuth)
  std::string request_id_;
  std::atomic<bool> registered_{false};
  uint64_t engine_id_ = 0;
  StreamMetrics metrics_;  // engine thread only
  std::shared_ptr<StreamLink> link_;  // shared with the sink the engine holds

  std::mutex mu_;
  bool active_ = false;   // writes start only once the constructor is done
  bool writing_ = false;  // a write is in flight
  bool complete_sent_ = false;
  bool finished_ = false; // Finish has been called
  std::optional<v1::GenerateChunk> pending_chunk_;
  std::optional<v1::GenerateComplete> pending_complete_;
  grpc::Status final_status_;
  v1::GenerateResponse in_flight_;
};

}  // namespace kvserve
