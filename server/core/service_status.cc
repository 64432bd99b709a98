#include "core/service_status.h"

namespace kvserve {

ServiceStatus submit_status(const SubmitResult& r) {
  switch (r.code) {
    case SubmitCode::kOk: return {};
    // A request that can never fit is the request's fault, not a load to retry later.
    case SubmitCode::kInvalidArgument:
    case SubmitCode::kNeverFits: return {ServiceCode::kInvalidArgument, r.message};
    case SubmitCode::kOverloaded: return {ServiceCode::kResourceExhausted, r.message};
    case SubmitCode::kShuttingDown: return {ServiceCode::kUnavailable, r.message};
  }
  return {ServiceCode::kInternal, "unknown submit result"};
}

ServiceStatus completion_status(const Completion& c, bool shutting_down) {
  switch (c.reason) {
    case FinishReason::kCancelled:
      return shutting_down ? ServiceStatus{ServiceCode::kUnavailable, "server is shutting down"}
                           : ServiceStatus{ServiceCode::kCancelled, "request cancelled"};
    case FinishReason::kDeadline: return {ServiceCode::kDeadlineExceeded, "deadline exceeded"};
    case FinishReason::kError: return {ServiceCode::kInternal, c.error};
    default: return {};
  }
}

}  // namespace kvserve
