#include "http/openai_routes.h"

#include <exception>

#include "core/json_body.h"
#include "core/request_ids.h"
#include "core/request_input.h"
#include "http/openai_fields.h"

namespace kvserve {
namespace {

using nlohmann::json;

RouteOutcome ok(const json& body) { return {200, json_text(body), std::nullopt, false, std::nullopt}; }

RouteOutcome tokenize(const json& body, const RouteContext& ctx) {
  if (!body.is_object() || !body.contains("prompt") || !body["prompt"].is_string())
    return error_outcome({ServiceCode::kInvalidArgument, "prompt: required, a string"});
  bool add_special = true;
  if (auto it = body.find("add_special"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return error_outcome({ServiceCode::kInvalidArgument, "add_special: expected true or false"});
    add_special = it->get<bool>();
  }
  const Tokenizer& tok = ctx.tokenizer;
  std::vector<int32_t> ids;
  const ServiceStatus st = resolve_prompt(body["prompt"].get<std::string>(), {}, tok, &ids);
  if (!st.ok()) return error_outcome(st);
  if (!add_special && !ids.empty() && tok.adds_bos() && ids.front() == tok.bos_id()) ids.erase(ids.begin());
  return ok({{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx.max_model_len}});
}

RouteOutcome detokenize(const json& body, const RouteContext& ctx) {
  if (!body.is_object() || !body.contains("tokens") || !body["tokens"].is_array())
    return error_outcome({ServiceCode::kInvalidArgument, "tokens: required, an array of token ids"});
  const Tokenizer& tok = ctx.tokenizer;
  std::vector<int32_t> ids;
  const json& tokens = body["tokens"];
  for (size_t i = 0; i < tokens.size(); ++i) {
    const json& t = tokens[i];
    const bool in_range = (t.is_number_unsigned() && t.get<uint64_t>() < static_cast<uint64_t>(tok.vocab_size())) ||
                          (t.is_number_integer() && !t.is_number_unsigned() && t.get<int64_t>() >= 0 &&
                           t.get<int64_t>() < tok.vocab_size());
    if (!in_range)
      return error_outcome({ServiceCode::kInvalidArgument, "tokens[" + std::to_string(i) + "]: " + json_text(t) +
                                                               " is not a token id (0.." +
                                                               std::to_string(tok.vocab_size() - 1) + ")"});
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  // Byte tokens can end mid-character: such bytes come back as U+FFFD, as streamed text does.
  return ok({{"prompt", valid_utf8(tok.decode(ids))}});
}

RouteOutcome templated(std::string_view text, const RouteContext& ctx) {
  std::string prompt;
  const nlohmann::ordered_json body = nlohmann::ordered_json::parse(text, nullptr, false);
  const ServiceStatus st = apply_template(body, ctx.chat_template, &prompt);
  if (!st.ok()) return error_outcome(st);
  return ok({{"prompt", valid_utf8(prompt)}});
}

// {"request_id": "..."} -> {"found": bool}, as the gRPC Abort answers.
RouteOutcome abort_request(const json& body, const RouteContext& ctx) {
  if (!body.is_object()) return error_outcome({ServiceCode::kInvalidArgument, "body: must be a JSON object"});
  const auto it = body.find("request_id");
  if (it == body.end() || !it->is_string())
    return error_outcome({ServiceCode::kInvalidArgument, "request_id: required, a string"});
  const std::string id = it->get<std::string>();
  if (std::string err = check_request_id(id); !err.empty()) return error_outcome({ServiceCode::kInvalidArgument, err});
  return ok({{"found", ctx.abort ? ctx.abort(id) : false}});
}

// {"prompt": "..." or "prompt_token_ids": [...], "loss_budget": 0.01}: HeadImportance's fields.
RouteOutcome head_importance(const json& body, const RouteContext& ctx) {
  if (!body.is_object()) return error_outcome({ServiceCode::kInvalidArgument, "body: must be a JSON object"});
  for (const auto& [key, value] : body.items())
    if (key != "prompt" && key != "prompt_token_ids" && key != "loss_budget")
      return error_outcome({ServiceCode::kInvalidArgument, valid_utf8(key) + ": not a field of this call (prompt, prompt_token_ids, loss_budget)"});
  std::string text;
  std::vector<int32_t> ids;
  if (auto it = body.find("prompt"); it != body.end()) {
    if (!it->is_string()) return error_outcome({ServiceCode::kInvalidArgument, "prompt: expected a string"});
    text = it->get<std::string>();
  }
  if (auto it = body.find("prompt_token_ids"); it != body.end()) {
    if (!it->is_array()) return error_outcome({ServiceCode::kInvalidArgument, "prompt_token_ids: expected an array of token ids"});
    for (size_t i = 0; i < it->size(); ++i) {
      const json& t = (*it)[i];
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
        return error_outcome({ServiceCode::kInvalidArgument, "prompt_token_ids[" + std::to_string(i) + "]: expected a token id"});
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
  }
  HeadImportanceInput in;
  in.loss_budget = kDefaultLossBudget;
  if (auto it = body.find("loss_budget"); it != body.end() && !it->is_null()) {
    if (!it->is_number()) return error_outcome({ServiceCode::kInvalidArgument, "loss_budget: expected a number"});
    in.loss_budget = it->get<double>();
    if (ServiceStatus st = check_loss_budget(in.loss_budget); !st.ok()) return error_outcome(st);
  }
  if (ServiceStatus st = inspection_prompt(ctx.tokenizer, ctx.inspect_max_tokens, text, ids, &in.prompt); !st.ok())
    return error_outcome(st);
  RouteOutcome out;
  out.head_importance = std::move(in);
  return out;
}

RouteOutcome completion(const json& body, std::string_view text, const RouteContext& ctx, bool chat) {
  RouteOutcome out;
  out.chat = chat;
  CompletionCall cc;
  const ServiceStatus st =
      chat ? parse_chat_request(body, ctx.tokenizer, ctx.model_ids, ctx.chat_template, ctx.max_request_tokens, &cc, text)
           : parse_completion_request(body, ctx.tokenizer, ctx.model_ids, &cc);
  if (!st.ok()) return error_outcome(st);
  keep_schema_order(text, cc.constraint_field, &cc.request.sampling.constraint);
  out.completion = std::move(cc);
  return out;
}

}  // namespace

bool is_post_route(std::string_view url) {
  return url == "/v1/completions" || url == "/v1/chat/completions" || url == "/tokenize" || url == "/detokenize" ||
         url == "/apply-template" || url == "/abort" || url == "/v1/head_importance";
}

RouteOutcome error_outcome(const ServiceStatus& s) {
  return {http_status_of(s.code), json_text(openai_error(s)), std::nullopt, false, std::nullopt};
}

json head_importance_json(const HeadImportanceResult& r) {
  json heads = json::array(), prunable = json::array();
  for (const HeadDrop& h : r.heads)
    heads.push_back({{"layer", h.layer}, {"head", h.head}, {"mean_logprob", h.mean_logprob}, {"drop", h.drop}});
  for (const HeadRef& h : r.prunable) prunable.push_back({{"layer", h.layer}, {"head", h.head}});
  return {{"object", "head_importance"},
          {"n_tokens", r.n_tokens},
          {"baseline_mean_logprob", r.baseline_mean_logprob},
          {"loss_budget", r.loss_budget},
          {"heads", std::move(heads)},
          {"prunable", std::move(prunable)},
          {"prunable_estimated_drop", r.prunable_estimated_drop},
          {"prunable_measured_drop", r.prunable_measured_drop}};
}

RouteOutcome answer_post(std::string_view url, std::string_view text, const RouteContext& ctx) {
  try {
    json body;
    if (ServiceStatus st = parse_json_body(text, &body); !st.ok()) return error_outcome(st);
    if (url == "/tokenize") return tokenize(body, ctx);
    if (url == "/detokenize") return detokenize(body, ctx);
    if (url == "/apply-template") return templated(text, ctx);
    if (url == "/abort") return abort_request(body, ctx);
    if (url == "/v1/head_importance") return head_importance(body, ctx);
    if (url == "/v1/completions") return completion(body, text, ctx, false);
    if (url == "/v1/chat/completions") return completion(body, text, ctx, true);
    return error_outcome({ServiceCode::kNotFound, "url: no such endpoint"});
  } catch (const std::bad_alloc&) {
    return error_outcome({ServiceCode::kResourceExhausted, "body: the server ran out of memory answering it"});
  } catch (const std::exception& e) {
    // Every refusal above names its field; this is what none foresaw, answered instead of
    // taking the process down.
    return error_outcome({ServiceCode::kInternal, std::string("internal error: ") + valid_utf8(e.what())});
  }
}

}  // namespace kvserve
