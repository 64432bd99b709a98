#include "core/service_state.h"

namespace kvserve {

bool ServiceState::abort(const std::string& tenant, const std::string& id) {
  const std::optional<uint64_t> engine_id = request_ids_.find(tenant, id);
  if (!engine_id || !*engine_id) return false;
  engine_.cancel(*engine_id);
  return true;
}

bool ServiceState::begin_inspection() {
  int32_t n = inspect_calls_.load();
  while (n < max_inspect_calls_)
    if (inspect_calls_.compare_exchange_weak(n, n + 1)) return true;
  return false;
}

void ServiceState::stream_started() {
  std::lock_guard<std::mutex> lock(streams_mu_);
  ++live_streams_;
}

void ServiceState::stream_done() {
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    --live_streams_;
  }
  streams_cv_.notify_all();
}

bool ServiceState::wait_streams_done(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(streams_mu_);
  return streams_cv_.wait_for(lock, timeout, [&] { return live_streams_ == 0; });
}

}  // namespace kvserve
