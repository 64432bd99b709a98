// Conversions between the kvserve.v1 messages and the engine's types. Bad fields become
// INVALID_ARGUMENT with a message naming the field.
#pragma once

#include <grpcpp/grpcpp.h>

#include <utility>
#include <vector>

#include "core/service_status.h"
#include "runtime/engine.h"
#include "kvserve.pb.h"

namespace kvserve {

// Builds the engine request (tokenizing a text prompt) and checks the request id; a non-OK
// status names the bad field.
grpc::Status to_engine_request(const v1::GenerateRequest& in, const Tokenizer& tokenizer, Request* out);

grpc::Status to_grpc(const ServiceStatus& s);
inline grpc::Status submit_grpc_status(const SubmitResult& r) { return to_grpc(submit_status(r)); }
// The initial metadata a Generate stream sends back: only values checked to be legal headers.
std::vector<std::pair<std::string, std::string>> response_metadata(const std::string& request_id);
v1::FinishReason to_proto(FinishReason r);
void to_proto(const TokenLogprob& in, v1::TokenLogprob* out);
void to_proto(const Completion& in, const std::string& request_id, v1::GenerateComplete* out);
void to_proto(const ModelInfo& info, const EngineOptions& options, v1::GetModelInfoResponse* out);
void to_proto(const EngineStats& s, v1::GetStatsResponse* out);

}  // namespace kvserve
