// Outcomes of a call in transport-neutral terms, so every front end (gRPC, HTTP) reports the
// same condition with the same words: how a submit refusal and a request's finish reason map
// to a status. Each front end maps ServiceCode to its own codes once.
#pragma once

#include <string>

#include "common/request.h"

namespace kvserve {

enum class ServiceCode {
  kOk,
  kInvalidArgument,   // a field is wrong; the message names it
  kUnauthenticated,
  kNotFound,
  kAlreadyExists,
  kResourceExhausted, // overloaded, or the request can never fit
  kUnavailable,       // shutting down
  kCancelled,
  kDeadlineExceeded,
  kInternal,
};

struct ServiceStatus {
  ServiceCode code = ServiceCode::kOk;
  std::string message;
  bool ok() const { return code == ServiceCode::kOk; }
};

// Why the engine refused a submit.
ServiceStatus submit_status(const SubmitResult& r);
// How a finished request ends its call: OK for length/stop, an error for the rest.
ServiceStatus completion_status(const Completion& c, bool shutting_down);

}  // namespace kvserve
