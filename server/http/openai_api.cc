#include "http/openai_api.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/request_input.h"

namespace kvserve {
namespace {

using nlohmann::json;

ServiceStatus invalid(const std::string& message) { return {ServiceCode::kInvalidArgument, message}; }

// Reads an optional number field; false (and *error set) if present and not a number in range.
template <typename T>
bool number(const json& body, const char* key, T& out, double lo, double hi, ServiceStatus* error) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_number() || (std::is_integral_v<T> && !it->is_number_integer())) {
    *error = invalid(std::string(key) + ": expected " + (std::is_integral_v<T> ? "an integer" : "a number") +
                     ", got " + it->dump());
    return false;
  }
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    *error = invalid(std::string(key) + ": " + it->dump() + " is out of range");
    return false;
  }
  if constexpr (std::is_integral_v<T>)
    out = static_cast<T>(it->get<int64_t>());
  else
    out = static_cast<T>(v);
  return true;
}

}  // namespace

std::string openai_field_message(const std::string& m) {
  static const std::vector<std::pair<std::string, std::string>> names = {
      {"sampling.max_new_tokens", "max_tokens"}, {"sampling.temperature", "temperature"},
      {"sampling.top_k", "top_k"},               {"sampling.top_p", "top_p"},
      {"sampling.min_p", "min_p"},               {"sampling.repetition_penalty", "repetition_penalty"},
      {"sampling.presence_penalty", "presence_penalty"}, {"sampling.frequency_penalty", "frequency_penalty"},
      {"sampling.stop", "stop"},                 {"sampling.top_logprobs", "logprobs"},
      {"prompt_token_ids", "prompt"},            {"prompt", "prompt"}};
  for (const auto& [from, to] : names)
    if (m.compare(0, from.size(), from) == 0) return to + m.substr(from.size());
  return m;
}

ServiceStatus parse_completion_request(const json& body, const Tokenizer& tokenizer,
                                       const std::vector<std::string>& model_ids, CompletionCall* out) {
  if (!body.is_object()) return invalid("body: expected a JSON object");
  auto model = body.find("model");
  if (model == body.end() || !model->is_string()) return invalid("model: required, a string");
  if (std::find(model_ids.begin(), model_ids.end(), model->get<std::string>()) == model_ids.end())
    return {ServiceCode::kNotFound, "model: '" + model->get<std::string>() + "' is not served here (GET /v1/models)"};
  CompletionCall& c = *out;
  SamplingParams& s = c.request.sampling;
  s.max_new_tokens = 16;  // OpenAI's default for completions
  ServiceStatus e;
  const double big = 1e9;
  if (!number(body, "max_tokens", s.max_new_tokens, 1, std::numeric_limits<int32_t>::max(), &e) ||
      !number(body, "temperature", s.temperature, 0, 100, &e) || !number(body, "top_p", s.top_p, -big, big, &e) ||
      !number(body, "top_k", s.top_k, -1, std::numeric_limits<int32_t>::max(), &e) ||
      !number(body, "min_p", s.min_p, -big, big, &e) ||
      !number(body, "presence_penalty", s.presence_penalty, -2, 2, &e) ||
      !number(body, "frequency_penalty", s.frequency_penalty, -2, 2, &e) ||
      !number(body, "repetition_penalty", s.repetition_penalty, -big, big, &e))
    return e;
  if (s.top_k == -1) s.top_k = 0;  // vLLM's "all"
  if (auto it = body.find("seed"); it != body.end() && !it->is_null()) {
    if (!it->is_number_integer()) return invalid("seed: expected an integer, got " + it->dump());
    s.seed = static_cast<uint64_t>(it->get<int64_t>());
  }
  int32_t n = 1;
  if (!number(body, "n", n, 1, 1, &e)) return invalid("n: only 1 completion per request is served, got " +
                                                      body["n"].dump());
  if (auto it = body.find("echo"); it != body.end() && it->is_boolean() && it->get<bool>())
    return invalid("echo: true is not supported");
  if (auto it = body.find("stop"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      s.stop.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const json& x : *it) {
        if (!x.is_string()) return invalid("stop: expected a string or an array of strings");
        s.stop.push_back(x.get<std::string>());
      }
    } else {
      return invalid("stop: expected a string or an array of strings");
    }
  }
  if (auto it = body.find("ignore_eos"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return invalid("ignore_eos: expected true or false");
    s.ignore_eos = it->get<bool>();
  }
  if (!number(body, "logprobs", c.logprobs, 0, 5, &e)) return e;
  if (c.logprobs >= 0) {
    s.logprobs = true;
    s.top_logprobs = c.logprobs;
  }
  if (auto it = body.find("stream"); it != body.end() && !it->is_null()) {
    if (!it->is_boolean()) return invalid("stream: expected true or false");
    c.stream = it->get<bool>();
  }
  if (auto it = body.find("stream_options"); it != body.end() && it->is_object())
    if (auto u = it->find("include_usage"); u != it->end() && u->is_boolean()) c.include_usage = u->get<bool>();
  if (auto it = body.find("user"); it != body.end() && it->is_string()) c.request.client_id = it->get<std::string>();

  // prompt: a string, an array of token ids, or an array holding one string.
  auto p = body.find("prompt");
  if (p == body.end() || p->is_null()) return invalid("prompt: required");
  std::string text;
  std::vector<int32_t> ids;
  if (p->is_string()) {
    text = p->get<std::string>();
    if (text.empty()) return invalid("prompt: must not be empty");
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    text = (*p)[0].get<std::string>();
  } else if (p->is_array() && !p->empty() && std::all_of(p->begin(), p->end(), [](const json& x) {
               return x.is_number_integer();
             })) {
    for (const json& x : *p) {
      const int64_t v = x.get<int64_t>();
      if (v < 0 || v >= tokenizer.vocab_size())
        return invalid("prompt: token id " + std::to_string(v) + " is outside the vocabulary (0.." +
                       std::to_string(tokenizer.vocab_size() - 1) + ")");
      ids.push_back(static_cast<int32_t>(v));
    }
  } else {
    return invalid("prompt: expected a string, an array of token ids, or an array of one string");
  }
  ServiceStatus st = resolve_prompt(text, ids, tokenizer, &c.request.prompt);
  if (!st.ok()) st.message = openai_field_message(st.message);
  return st;
}

const char* openai_finish_reason(FinishReason r) {
  switch (r) {
    case FinishReason::kLength: return "length";
    case FinishReason::kStop:
    case FinishReason::kStopString: return "stop";
    default: return "abort";
  }
}

unsigned http_status_of(ServiceCode code) {
  switch (code) {
    case ServiceCode::kOk: return 200;
    case ServiceCode::kInvalidArgument: return 400;
    case ServiceCode::kUnauthenticated: return 401;
    case ServiceCode::kNotFound: return 404;
    case ServiceCode::kAlreadyExists: return 409;
    case ServiceCode::kResourceExhausted: return 429;
    case ServiceCode::kUnavailable: return 503;
    case ServiceCode::kCancelled: return 499;
    case ServiceCode::kDeadlineExceeded: return 504;
    case ServiceCode::kInternal: return 500;
  }
  return 500;
}

json openai_error(const ServiceStatus& s) {
  static const char* types[] = {"", "invalid_request_error", "authentication_error", "not_found_error", "conflict_error",
                                "rate_limit_error", "service_unavailable", "cancelled", "timeout", "internal_error"};
  const std::string& m = s.message;
  const size_t colon = m.find(':');
  json param = nullptr;
  if (s.code == ServiceCode::kInvalidArgument && colon != std::string::npos && m.find(' ') > colon)
    param = m.substr(0, colon);
  return {{"error",
           {{"message", m}, {"type", types[static_cast<int>(s.code)]}, {"param", param}, {"code", nullptr}}}};
}

CompletionWriter::CompletionWriter(std::string id, std::string model, int64_t created, const Tokenizer& tokenizer,
                                   int32_t logprobs)
    : id_(std::move(id)), model_(std::move(model)), created_(created), tokenizer_(tokenizer), logprobs_(logprobs) {}

json CompletionWriter::chunk(const std::string& text, const json& logprobs, const char* finish) const {
  return {{"id", id_},
          {"object", "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices",
           json::array({{{"index", 0}, {"text", text}, {"logprobs", logprobs},
                         {"finish_reason", finish ? json(finish) : json(nullptr)}}})}};
}

json CompletionWriter::usage() const {
  const Completion& c = completion_;
  return {{"prompt_tokens", c.prompt_tokens},
          {"completion_tokens", c.completion_tokens},
          {"total_tokens", c.prompt_tokens + c.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", c.cached_prompt_tokens}}}};
}

// Completions' logprobs object: tokens, token_logprobs, top_logprobs (token text -> logprob).
json CompletionWriter::logprobs_of(const Event& e) const {
  if (logprobs_ < 0) return nullptr;
  json lp = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
             {"text_offset", json::array()}};
  for (const TokenLogprob& t : e.logprobs) {
    lp["tokens"].push_back(tokenizer_.token_bytes(t.token));
    lp["token_logprobs"].push_back(t.logprob);
    json top = json::object();
    for (const auto& [tok, p] : t.top) top[tokenizer_.token_bytes(tok)] = p;
    lp["top_logprobs"].push_back(top);
    lp["text_offset"].push_back(text_.size());
  }
  return lp;
}

std::string CompletionWriter::stream_event(const Event& event, bool include_usage) {
  std::string out;
  if (!event.text.empty() || !event.logprobs.empty())
    out += "data: " + chunk(event.text, logprobs_of(event), nullptr).dump() + "\n\n";
  text_ += event.text;
  if (!event.completion) return out;
  completion_ = *event.completion;
  out += "data: " + chunk("", nullptr, openai_finish_reason(completion_.reason)).dump() + "\n\n";
  if (include_usage) {
    json u = {{"id", id_}, {"object", "text_completion"}, {"created", created_}, {"model", model_},
              {"choices", json::array()}, {"usage", usage()}};
    out += "data: " + u.dump() + "\n\n";
  }
  out += "data: [DONE]\n\n";
  return out;
}

void CompletionWriter::add(const Event& event) {
  if (logprobs_ >= 0) {
    const json lp = logprobs_of(event);
    if (all_logprobs_.is_null()) {
      all_logprobs_ = lp;
    } else {
      for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
        for (const json& x : lp[k]) all_logprobs_[k].push_back(x);
    }
  }
  text_ += event.text;
  if (event.completion) completion_ = *event.completion;
}

json CompletionWriter::body() const {
  json b = chunk(text_, all_logprobs_, openai_finish_reason(completion_.reason));
  b["usage"] = usage();
  return b;
}

}  // namespace kvserve
