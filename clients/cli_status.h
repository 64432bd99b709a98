// How kvserve-cli reports a failed call: the status by name (INVALID_ARGUMENT, not 3) and, where
// the server was never reached or wants a token, what to check.
#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <iterator>
#include <string>

namespace kvserve {

inline const char* status_name(grpc::StatusCode c) {
  static const char* const names[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                      "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                      "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                      "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  const int i = static_cast<int>(c);
  return i >= 0 && i < static_cast<int>(std::size(names)) ? names[i] : "UNKNOWN_CODE";
}

// Prints "kvserve-cli: INVALID_ARGUMENT: sampling.top_p ..." (and a hint) to stderr; returns 1.
inline int cli_fail(const grpc::Status& s, const std::string& addr) {
  std::fprintf(stderr, "kvserve-cli: %s: %s\n", status_name(s.error_code()), s.error_message().c_str());
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE)
    std::fprintf(stderr, "kvserve-cli: no server answered%s%s: is kvserve running there (--addr HOST:PORT)?\n",
                 addr.empty() ? "" : " at ", addr.c_str());
  if (s.error_code() == grpc::StatusCode::UNAUTHENTICATED)
    std::fprintf(stderr, "kvserve-cli: the server requires a bearer token: --token\n");
  return 1;
}

}  // namespace kvserve
