// What a server keeps whatever transport its clients use: the engine, the accepted bearer
// tokens, the Prometheus metrics, the registry of live request ids, the inspection slots, the
// draining flag and the count of live streams. Both front ends (gRPC, HTTP) and the metrics port
// use one ServiceState as peers, so an id one front end registered can be aborted through the
// other, and a drain reaches both.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "core/bearer_auth.h"
#include "core/metrics.h"
#include "core/request_ids.h"
#include "runtime/engine.h"

namespace kvserve {

class ServiceState {
 public:
  // inspect_max_tokens: longest prompt the inspection calls take (server.inspect_max_tokens);
  // max_inspect_calls: inspection calls running at once (server.max_inspect_calls).
  ServiceState(Engine& engine, BearerAuth auth, int32_t inspect_max_tokens, int32_t max_inspect_calls = 4)
      : engine_(engine), auth_(std::move(auth)), inspect_max_tokens_(inspect_max_tokens),
        max_inspect_calls_(max_inspect_calls) {}

  Engine& engine() { return engine_; }
  const BearerAuth& auth() const { return auth_; }
  ServerMetrics& metrics() { return metrics_; }
  // Request ids of live generations by tenant, whichever front end took them.
  RequestRegistry& request_ids() { return request_ids_; }

  // Cancels `tenant`'s live request `id`; false when that tenant has none of that id (another
  // tenant's request is, to this caller, one that does not exist). `id` must have passed
  // check_request_id.
  bool abort(const std::string& tenant, const std::string& id);

  int32_t inspect_max_tokens() const { return inspect_max_tokens_; }
  int32_t max_inspect_calls() const { return max_inspect_calls_; }
  // A slot for one inspection call (false: max_inspect_calls are running); end_inspection gives
  // it back.
  bool begin_inspection();
  void end_inspection() { --inspect_calls_; }

  // From now on new work is refused and cancelled streams end as "shutting down".
  void begin_shutdown() { shutting_down_ = true; }
  bool shutting_down() const { return shutting_down_; }

  // Live streams, so shutdown can wait for the last final message to be written.
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
