#include "http/openai_api.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/json_body.h"
#include "core/log_text.h"
#include "core/request_input.h"
#include "http/openai_fields.h"
#include "http/openai_tools.h"
#include "text/utf8.h"

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
                     ", got " + json_brief(*it));
    return false;
  }
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    *error = invalid(std::string(key) + ": " + json_brief(*it) + " is out of range");
    return false;
  }
  if constexpr (std::is_integral_v<T>)
    out = static_cast<T>(it->get<int64_t>());
  else
    out = static_cast<T>(v);
  return true;
}

// One chat message as OpenAI defines it: a string role; content absent, null, a string, or an
// array of parts, each {"type": "text", "text": "..."}. Other part types (images, audio) are
// refused by name rather than dropped: a text model cannot honour them.
ServiceStatus check_message(const json& msg, const std::string& where) {
  if (!msg.is_object()) return invalid(where + ": expected an object");
  auto role = msg.find("role");
  if (role == msg.end() || !role->is_string()) return invalid(where + ".role: required, a string");
  auto content = msg.find("content");
  if (content == msg.end() || content->is_null() || content->is_string()) return {};
  if (!content->is_array()) return invalid(where + ".content: expected a string, null or an array of parts");
  for (size_t i = 0; i < content->size(); ++i) {
    const json& part = (*content)[i];
    const std::string at = where + ".content[" + std::to_string(i) + "]";
    if (!part.is_object()) return invalid(at + ": expected an object");
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) return invalid(at + ".type: required, a string");
    if (*type != "text")
      return invalid(at + ".type: '" + log_escape(type->get<std::string>(), 60) +
                     "' is not supported (this model reads text parts only)");
    auto text = part.find("text");
    if (text == part.end() || !text->is_string()) return invalid(at + ".text: required, a string");
  }
  return {};
}

ServiceStatus check_model(const json& body, const std::vector<std::string>& model_ids) {
  if (!body.is_object()) return invalid("body: expected a JSON object");
  auto model = body.find("model");
  if (model == body.end() || !model->is_string()) return invalid("model: required, a string");
  if (std::find(model_ids.begin(), model_ids.end(), model->get<std::string>()) == model_ids.end())
    return {ServiceCode::kNotFound, "model: " + json_brief(*model) + " is not served here (GET /v1/models)"};
  return {};
}

// The fields completions and chat share (everything but the prompt and the model).
ServiceStatus parse_sampling(const json& body, CompletionCall* out) {
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
    if (!it->is_number_integer()) return invalid("seed: expected an integer, got " + json_brief(*it));
    s.seed = static_cast<uint64_t>(it->get<int64_t>());
  }
  int32_t n = 1;
  if (!number(body, "n", n, 1, 1, &e)) return invalid("n: only 1 completion per request is served, got " +
                                                      json_brief(body["n"]));
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
  if (auto it = body.find("speculative"); it != body.end() && !it->is_null()) {  // kvserve's field
    if (!it->is_boolean()) return invalid("speculative: expected true or false");
    s.speculative = it->get<bool>();
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
  if (auto it = body.find("cache_salt"); it != body.end() && !it->is_null()) {  // vLLM's field
    if (!it->is_string() || it->get_ref<const std::string&>().empty() || it->get_ref<const std::string&>().size() > 1024)
      return invalid("cache_salt: expected a string of 1 to 1024 bytes");
    c.request.cache_salt = it->get<std::string>();
  }

  return {};
}

ServiceStatus parse_constraint_fields(const json& body, const Tokenizer& tokenizer, CompletionCall* out) {
  SamplingParams& s = out->request.sampling;
  if (ServiceStatus st = parse_output_constraint(body, &s.constraint, &out->constraint_field); !st.ok()) return st;
  return parse_logit_bias(body, tokenizer.vocab_size(), &s.logit_bias);
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
  if (ServiceStatus st = check_model(body, model_ids); !st.ok()) return st;
  if (ServiceStatus st = check_fields(body, false); !st.ok()) return st;
  if (ServiceStatus st = parse_sampling(body, out); !st.ok()) return st;
  if (ServiceStatus st = parse_constraint_fields(body, tokenizer, out); !st.ok()) return st;
  CompletionCall& c = *out;
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

namespace {

// The conversation (and tools) rendered by the template; *tools gets the tool fields.
ServiceStatus render_chat(const nlohmann::ordered_json& body, const ChatTemplate& chat_template, std::string* prompt,
                          ToolRequest* tools) {
  if (!body.is_object()) return invalid("body: expected a JSON object");
  auto m = body.find("messages");
  if (m == body.end() || !m->is_array() || m->empty()) return invalid("messages: required, a non-empty array");
  for (size_t i = 0; i < m->size(); ++i)
    if (ServiceStatus st = check_message((*m)[i], "messages[" + std::to_string(i) + "]"); !st.ok()) return st;
  if (ServiceStatus st = parse_tool_fields(body, tools); !st.ok()) return st;
  ChatTurns turns;
  turns.messages = *m;
  // tool_choice none: the model is not told of tools it may not call.
  if (tools->calls_possible()) turns.tools = tools->tools;
  if (auto g = body.find("add_generation_prompt"); g != body.end() && !g->is_null()) {
    if (!g->is_boolean()) return invalid("add_generation_prompt: expected true or false");
    turns.add_generation_prompt = g->get<bool>();
  }
  // vLLM's chat_template_kwargs: names the template reads besides the conversation
  // ({"enable_thinking": false} turns Qwen3's reasoning off).
  if (auto k = body.find("chat_template_kwargs"); k != body.end() && !k->is_null()) {
    if (!k->is_object()) return invalid("chat_template_kwargs: expected an object");
    for (const char* reserved : {"messages", "add_generation_prompt", "tools"})
      if (k->contains(reserved))
        return invalid(std::string("chat_template_kwargs.") + reserved + ": set by the request itself, not here");
    turns.kwargs = *k;
  }
  try {
    *prompt = chat_template.render(turns);
  } catch (const jinja::JinjaError& e) {
    return invalid(std::string("messages: the chat template refuses them: ") + e.what());
  }
  return {};
}

}  // namespace

ServiceStatus apply_template(const nlohmann::ordered_json& body, const ChatTemplate& chat_template, std::string* prompt) {
  ToolRequest tools;
  return render_chat(body, chat_template, prompt, &tools);
}

ServiceStatus parse_chat_request(const json& body, const Tokenizer& tokenizer,
                                 const std::vector<std::string>& model_ids, const ChatTemplate& chat_template,
                                 int32_t max_request_tokens, CompletionCall* out, std::string_view raw_body) {
  if (ServiceStatus st = check_model(body, model_ids); !st.ok()) return st;
  if (ServiceStatus st = check_fields(body, true); !st.ok()) return st;
  json fields = body;
  // Chat's logprobs is a boolean, with top_logprobs beside it.
  fields.erase("logprobs");
  if (auto it = body.find("max_completion_tokens"); it != body.end() && !body.contains("max_tokens"))
    fields["max_tokens"] = *it;
  if (ServiceStatus st = parse_sampling(fields, out); !st.ok()) return st;
  if (ServiceStatus st = parse_constraint_fields(body, tokenizer, out); !st.ok()) return st;
  CompletionCall& c = *out;
  if (auto lp = body.find("logprobs"); lp != body.end() && lp->is_boolean() && lp->get<bool>()) {
    int32_t top = 0;
    ServiceStatus e;
    if (!number(body, "top_logprobs", top, 0, 20, &e)) return e;
    c.logprobs = top;
    c.request.sampling.logprobs = true;
    c.request.sampling.top_logprobs = top;
  }
  nlohmann::ordered_json ordered_body;
  if (!raw_body.empty()) ordered_body = nlohmann::ordered_json::parse(raw_body, nullptr, false);
  if (raw_body.empty() || ordered_body.is_discarded()) ordered_body = body;
  std::string prompt;
  ToolRequest tools;
  if (ServiceStatus st = render_chat(ordered_body, chat_template, &prompt, &tools); !st.ok()) return st;
  if (!utf8_is_valid(prompt)) return invalid("messages: not valid UTF-8");
  SamplingParams& s = c.request.sampling;
  const ToolFormat format = chat_template.tool_format();
  if (chat_template.thinks() || tools.calls_possible()) {
    AnswerFormat a;
    a.tools = format;
    a.parse_tools = tools.calls_possible();
    a.reasoning = chat_template.reasoning();
    if (!a.reasoning.open.empty()) a.reasoning_open = prompt_opens_reasoning(prompt, a.reasoning.open, a.reasoning.close);
    if (a.parse_tools) a.declared = tools.tools;
    c.answer = std::move(a);
    c.parallel_tool_calls = tools.parallel;
    // Formats whose markers are control tokens: the parser must see them in the text.
    s.special_text = format == ToolFormat::kHarmony ||
                     (a.parse_tools && (format == ToolFormat::kMistral || format == ToolFormat::kDeepSeek ||
                                        format == ToolFormat::kLlama3));
  }
  OutputConstraint call;
  if (ServiceStatus st = tool_choice_constraint(tools, format, &call); !st.ok()) return st;
  if (call.active() && s.constraint.active()) {
    // "auto" leaves the answer to the response format; a required call cannot be both.
    if (tools.choice != ToolRequest::Choice::kAuto)
      return invalid("tool_choice: a required call cannot be combined with " + c.constraint_field);
  } else if (call.active()) {
    s.constraint = std::move(call);
    c.constraint_field = "tools";
  }
  // The constraint applies to the answer after a <think> block.
  if (s.constraint.active() && c.answer && c.answer->reasoning.open == kThinkOpen)
    s.constraint.reasoning = c.answer->reasoning_open ? 1 : 0;
  // The template writes the BOS text itself where the model wants one: not added again.
  c.request.prompt = tokenizer.encode(prompt, false, true);
  if (c.request.prompt.empty()) return invalid("messages: the rendered prompt is empty");
  if (!body.contains("max_tokens") && !body.contains("max_completion_tokens"))  // as much as the context leaves
    c.request.sampling.max_new_tokens =
        std::max<int32_t>(1, max_request_tokens - static_cast<int32_t>(c.request.prompt.size()));
  return {};
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
                                   int32_t logprobs, bool chat, std::optional<AnswerFormat> answer, bool parallel_tool_calls)
    : id_(std::move(id)), model_(std::move(model)), created_(created), tokenizer_(tokenizer), logprobs_(logprobs),
      chat_(chat), answer_(chat ? std::move(answer) : std::nullopt), parallel_(parallel_tool_calls) {
  if (answer_) parser_.emplace(*answer_);
}

json CompletionWriter::chunk(const std::string& text, const json& logprobs, const char* finish,
                             const std::string& reasoning) const {
  const json reason = finish ? json(finish) : json(nullptr);
  if (!chat_)
    return {{"id", id_},
            {"object", "text_completion"},
            {"created", created_},
            {"model", model_},
            {"choices", json::array({{{"index", 0}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", reason}}})}};
  json delta = json::object();
  if (!role_sent_) delta["role"] = "assistant";
  if (!reasoning.empty()) delta["reasoning_content"] = reasoning;
  if (!text.empty() || (!finish && reasoning.empty())) delta["content"] = text;
  return {{"id", id_},
          {"object", "chat.completion.chunk"},
          {"created", created_},
          {"model", model_},
          {"choices", json::array({{{"index", 0}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", reason}}})}};
}

json CompletionWriter::call_chunk(const json& call_delta) const {
  return {{"id", id_},
          {"object", "chat.completion.chunk"},
          {"created", created_},
          {"model", model_},
          {"choices", json::array({{{"index", 0},
                                    {"delta", {{"tool_calls", json::array({call_delta})}}},
                                    {"logprobs", nullptr},
                                    {"finish_reason", nullptr}}})}};
}

// A call's id where the answer carries none: the same in the stream and the whole answer.
// Mistral's templates take back only 9 letters and digits.
std::string CompletionWriter::call_id(size_t index) const {
  static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  uint64_t h = 1469598103934665603ull;
  for (char ch : id_ + "#" + std::to_string(index)) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
  const bool mistral = answer_ && answer_->tools == ToolFormat::kMistral;
  std::string out = mistral ? "" : "call_";
  for (int i = 0; i < (mistral ? 9 : 24); ++i) {
    out += kAlnum[h % 62];
    h = h / 62 ^ (h * 0x9E3779B97F4A7C15ull);
  }
  return out;
}

const char* CompletionWriter::finish_reason(size_t calls) const {
  if (calls > 0 && completion_.reason != FinishReason::kLength) return "tool_calls";
  return openai_finish_reason(completion_.reason);
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
  if (chat_) {  // chat's shape: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}
    const auto entry = [&](int32_t token, float logprob) {
      // A byte token's bytes can be half a character: "token" is the text with U+FFFD in their
      // place (as the streamed text has), "bytes" the exact bytes.
      const std::string bytes = tokenizer_.token_bytes(token);
      return json{{"token", valid_utf8(bytes)}, {"logprob", logprob}, {"bytes", std::vector<uint8_t>(bytes.begin(), bytes.end())}};
    };
    json content = json::array();
    for (const TokenLogprob& t : e.logprobs) {
      json item = entry(t.token, t.logprob);
      item["top_logprobs"] = json::array();
      for (const auto& [tok, p] : t.top) item["top_logprobs"].push_back(entry(tok, p));
      content.push_back(item);
    }
    return {{"content", content}};
  }
  json lp = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()},
             {"text_offset", json::array()}};
  for (const TokenLogprob& t : e.logprobs) {
    lp["tokens"].push_back(valid_utf8(tokenizer_.token_bytes(t.token)));
    lp["token_logprobs"].push_back(t.logprob);
    json top = json::object();
    for (const auto& [tok, p] : t.top) top[valid_utf8(tokenizer_.token_bytes(tok))] = p;
    lp["top_logprobs"].push_back(top);
    lp["text_offset"].push_back(text_.size());
  }
  return lp;
}

std::string CompletionWriter::stream_event(const Event& event, bool include_usage, const ServiceStatus& ended) {
  std::string out;
  ParsedAnswer piece;
  if (parser_) {
    piece = parser_->push(event.text);
    if (event.completion) {
      ParsedAnswer rest = parser_->finish();
      piece.reasoning += rest.reasoning;
      piece.content += rest.content;
      for (ToolCall& c : rest.calls) piece.calls.push_back(std::move(c));
    }
  } else {
    piece.content = event.text;
  }
  const bool news = !piece.content.empty() || !piece.reasoning.empty() || !event.logprobs.empty();
  if (news || (chat_ && !role_sent_)) {
    out += "data: " + json_text(chunk(piece.content, logprobs_of(event), nullptr, piece.reasoning)) + "\n\n";
    role_sent_ = true;
  }
  // Each call as OpenAI streams one: its index, id, type and name first, then its arguments.
  for (const ToolCall& c : piece.calls) {
    if (!parallel_ && calls_sent_ > 0) break;
    const size_t i = calls_sent_++;
    const std::string id = c.id.empty() ? call_id(i) : c.id;
    out += "data: " +
           json_text(call_chunk({{"index", i}, {"id", id}, {"type", "function"}, {"function", {{"name", c.name}, {"arguments", ""}}}})) +
           "\n\n";
    out += "data: " + json_text(call_chunk({{"index", i}, {"function", {{"arguments", c.arguments}}}})) + "\n\n";
  }
  text_ += event.text;
  if (!event.completion) return out;
  completion_ = *event.completion;
  if (!ended.ok()) return out + "data: " + json_text(openai_error(ended)) + "\n\ndata: [DONE]\n\n";
  out += "data: " + json_text(chunk("", nullptr, finish_reason(calls_sent_))) + "\n\n";
  if (include_usage) {
    json u = {{"id", id_}, {"object", chat_ ? "chat.completion.chunk" : "text_completion"}, {"created", created_},
              {"model", model_},
              {"choices", json::array()}, {"usage", usage()}};
    out += "data: " + json_text(u) + "\n\n";
  }
  out += "data: [DONE]\n\n";
  return out;
}

void CompletionWriter::add(const Event& event) {
  if (logprobs_ >= 0) {
    const json lp = logprobs_of(event);
    if (all_logprobs_.is_null()) {
      all_logprobs_ = lp;
    } else if (chat_) {
      for (const json& x : lp["content"]) all_logprobs_["content"].push_back(x);
    } else {
      for (const char* k : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
        for (const json& x : lp[k]) all_logprobs_[k].push_back(x);
    }
  }
  text_ += event.text;
  if (event.completion) completion_ = *event.completion;
}

json CompletionWriter::body() const {
  json b;
  if (chat_) {
    json message = {{"role", "assistant"}, {"content", text_}};
    size_t calls = 0;
    if (answer_) {
      const ParsedAnswer p = parse_answer(text_, *answer_);
      message["content"] = p.content;
      if (!p.reasoning.empty()) message["reasoning_content"] = p.reasoning;
      json tool_calls = json::array();
      for (const ToolCall& c : p.calls) {
        if (!parallel_ && calls > 0) break;
        tool_calls.push_back({{"id", c.id.empty() ? call_id(calls) : c.id},
                              {"type", "function"},
                              {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
        ++calls;
      }
      if (calls > 0) {
        message["tool_calls"] = std::move(tool_calls);
        if (p.content.empty()) message["content"] = nullptr;  // as OpenAI answers a call
      }
    }
    const char* finish = finish_reason(calls);
    b = {{"id", id_},
         {"object", "chat.completion"},
         {"created", created_},
         {"model", model_},
         {"choices", json::array({{{"index", 0},
                                   {"message", message},
                                   {"logprobs", all_logprobs_},
                                   {"finish_reason", finish}}})}};
  } else {
    b = chunk(text_, all_logprobs_, openai_finish_reason(completion_.reason));
  }
  b["usage"] = usage();
  return b;
}

}  // namespace kvserve
