// Test helper: the server's stats once nothing runs or waits and every KV block is free again
// (cancels and deadlines free their blocks at the engine's next step), or after 3 s as they are.
#pragma once

#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <thread>

#include "kvserve.grpc.pb.h"

namespace kvserve::testing {

inline v1::GetStatsResponse stats_when_idle(v1::Inference::Stub& stub) {
  v1::GetStatsResponse s;
  for (int i = 0; i < 300; ++i) {
    grpc::ClientContext ctx;
    EXPECT_TRUE(stub.GetStats(&ctx, {}, &s).ok());
    if (s.num_requests_running() == 0 && s.num_requests_waiting() == 0 && s.blocks_free() == s.blocks_total()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return s;
}

}  // namespace kvserve::testing
