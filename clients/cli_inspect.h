// kvserve-cli's inspection commands: `inspect` (attention per head, optionally the head atlas page
// and the raw response as JSON) and `head-importance` (heads ranked by the likelihood drop their
// ablation causes).
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "kvserve.grpc.pb.h"

namespace kvserve {

// One gRPC call a context: the CLI's metadata and deadline, fresh for each call.
using ContextFactory = std::function<std::unique_ptr<grpc::ClientContext>()>;

struct InspectOptions {
  std::string prompt;        // the text whose attention is shown
  std::string html_path;     // non-empty: write the head atlas page here
  std::string json_path;     // non-empty: write the InspectAttention response (proto3 JSON, float weights) here
  bool importance = false;   // also run HeadImportance on the same text, for the page
  double loss_budget = 0.01; // HeadImportance's budget, nats/token
};

int cli_inspect(v1::Inference::Stub& stub, const ContextFactory& context, const InspectOptions& options);
int cli_head_importance(v1::Inference::Stub& stub, grpc::ClientContext& ctx, const std::string& text,
                        double loss_budget, int top);

}  // namespace kvserve
