// What one POST to the OpenAI-style routes comes to, decided without a socket: the body parsed
// (depth-bounded, errors naming the field), validated and tokenized, giving either a reply to
// send as it is or a completion to start. The HTTP server runs it on a worker thread, so a
// multi-megabyte prompt never holds up the connection thread; the request fuzzer runs it too.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/head_importance.h"
#include "http/openai_api.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace kvserve {

struct RouteContext {
  const Tokenizer& tokenizer;
  const ChatTemplate& chat_template;
  const std::vector<std::string>& model_ids;  // names "model" may use
  int32_t max_model_len = 0;
  int32_t max_request_tokens = 0;  // what the whole cache holds: a chat without max_tokens is sized to it
  // POST /abort: cancels the caller's live request of that id, true if there was one (unset:
  // none is ever found).
  std::function<bool(const std::string& request_id)> abort = {};
  int32_t inspect_max_tokens = 0;  // longest prompt POST /v1/head_importance takes
};

// POST /v1/head_importance, once valid: the prompt's ids and the loss budget (nats per token).
struct HeadImportanceInput {
  std::vector<int32_t> prompt;
  double loss_budget = 0;
};

struct RouteOutcome {
  unsigned status = 200;
  std::string body;                          // JSON text, when there is nothing to start
  std::optional<CompletionCall> completion;  // the two completion routes, once valid
  bool chat = false;                         // completion came from /v1/chat/completions
  std::optional<HeadImportanceInput> head_importance;  // POST /v1/head_importance, once valid
};

// The POST routes this answers.
bool is_post_route(std::string_view url);

// url: one of is_post_route's; body: the raw request body. Never throws for any body.
RouteOutcome answer_post(std::string_view url, std::string_view body, const RouteContext& ctx);

// An error reply in OpenAI's shape.
RouteOutcome error_outcome(const ServiceStatus& s);

// POST /v1/head_importance's answer: the fields of gRPC's HeadImportanceResponse, same names.
nlohmann::json head_importance_json(const HeadImportanceResult& r);

}  // namespace kvserve
