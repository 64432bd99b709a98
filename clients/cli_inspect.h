// kvserve-cli's inspection commands: `inspect` (attention per head, optional HTML report) and
// `head-importance` (heads ranked by the likelihood drop their ablation causes).
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>

#include "kvserve.grpc.pb.h"

namespace kvserve {

int cli_inspect(v1::Inference::Stub& stub, grpc::ClientContext& ctx, const std::string& prompt,
                const std::string& html_path);
int cli_head_importance(v1::Inference::Stub& stub, grpc::ClientContext& ctx, const std::string& text,
                        double loss_budget, int top);

}  // namespace kvserve
