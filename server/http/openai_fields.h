// The request fields beside the prompt and sampling numbers: output constraints as OpenAI
// (response_format), vLLM (structured_outputs and the older guided_* fields) and llama.cpp
// (json_schema, grammar) write them, logit_bias, and the check that every field of a body is
// one this server implements (anything else is a 400 naming it, as OpenAI answers).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "common/request.h"
#include "core/service_status.h"

namespace kvserve {

// Reads the constraint fields into *out; *field is the one used ("response_format", ...), for
// naming it in the engine's later errors. At most one constraint per request.
ServiceStatus parse_output_constraint(const nlohmann::json& body, OutputConstraint* out, std::string* field);

// The body was parsed into a json that sorts object keys; a JSON Schema's properties must come
// out in the order the client wrote them, so the schema is taken again from the raw body.
void keep_schema_order(std::string_view raw_body, const std::string& field, OutputConstraint* c);

// logit_bias: {"token id": bias} (OpenAI) or [[id, bias], ...] (llama.cpp); bias -100..100, or
// false for a banned token (llama.cpp).
ServiceStatus parse_logit_bias(const nlohmann::json& body, int32_t vocab_size,
                               std::vector<std::pair<int32_t, float>>* out);

// A 400 naming the first field of body that neither endpoint implements (chat: the chat
// endpoint's fields, else the completions endpoint's).
ServiceStatus check_fields(const nlohmann::json& body, bool chat);

}  // namespace kvserve
