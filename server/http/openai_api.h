// OpenAI's completions API in transport-neutral terms: a request body to an engine Request (the
// fields OpenAI's clients send, and vLLM's extras), events to the JSON objects and Server-Sent
// Event chunks they expect, and errors as OpenAI's error object. No sockets here
// (http_server.h carries them), so all of it is unit-tested.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

#include "core/service_status.h"
#include "common/request.h"
#include "text/chat_template.h"
#include "text/answer_parser.h"
#include "text/tokenizer.h"

namespace kvserve {

// What a completions call asked for besides the engine request.
struct CompletionCall {
  Request request;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
  int32_t logprobs = -1;       // completions' integer logprobs (0..5), -1 = none
  std::string constraint_field;  // the field that gave request.sampling.constraint, for errors
  // Chat whose answer is taken apart (a template that writes reasoning, or tools declared):
  // into reasoning_content, content and tool_calls.
  std::optional<AnswerFormat> answer;
  bool parallel_tool_calls = true;  // false: at most one call is returned
};

// Parses a /v1/completions body; an error names OpenAI's field ("max_tokens: must be >= 1").
// model_ids: the names the served model answers to (the request's "model" must be one).
ServiceStatus parse_completion_request(const nlohmann::json& body, const Tokenizer& tokenizer,
                                       const std::vector<std::string>& model_ids, CompletionCall* out);

// Parses a /v1/chat/completions body: the messages rendered by the model's chat template (its
// refusal is a 400 naming messages), the sampling fields as for completions (max_tokens or
// max_completion_tokens; by default as many as fit: max_request_tokens less the prompt, as vLLM
// sizes them), logprobs true with top_logprobs.
// raw_body: the body's text, read again with its key order kept (tool schemas are rendered with
// it); "" = the body's own order.
ServiceStatus parse_chat_request(const nlohmann::json& body, const Tokenizer& tokenizer,
                                 const std::vector<std::string>& model_ids, const ChatTemplate& chat_template,
                                 int32_t max_request_tokens, CompletionCall* out, std::string_view raw_body = {});

// /apply-template: {"messages", "tools"?, "add_generation_prompt"?, "chat_template_kwargs"?} ->
// the prompt text.
ServiceStatus apply_template(const nlohmann::ordered_json& body, const ChatTemplate& chat_template, std::string* prompt);

// The engine's validation messages name its own fields ("sampling.top_p: ..."); the HTTP API
// reports OpenAI's ("top_p: ...").
std::string openai_field_message(const std::string& engine_message);

// OpenAI's finish_reason for a completion: "stop" (EOS, a stop token or string) or "length".
const char* openai_finish_reason(FinishReason r);

// {"error": {"message", "type", "param", "code"}} and the HTTP status for a service status.
unsigned http_status_of(ServiceCode code);
nlohmann::json openai_error(const ServiceStatus& s);

// Accumulates one completion's events into the pieces of the response, in both shapes.
class CompletionWriter {
 public:
  // chat: the chat completion shapes (chat.completion, deltas) instead of text completions'.
  // answer, parallel_tool_calls: CompletionCall's (chat only).
  CompletionWriter(std::string id, std::string model, int64_t created, const Tokenizer& tokenizer, int32_t logprobs,
                   bool chat = false, std::optional<AnswerFormat> answer = std::nullopt, bool parallel_tool_calls = true);
  // The SSE lines for one event when streaming ("data: {...}\n\n", possibly none), and the
  // final ones on its completion: the finish chunk, the usage chunk if asked and "data: [DONE]"
  // when `ended` is OK; an error object ({"error": ...}, which OpenAI's clients raise) and
  // "data: [DONE]" when the generation was cut (an engine error, a drain, a deadline).
  std::string stream_event(const Event& event, bool include_usage, const ServiceStatus& ended = {});
  // Called with every event when not streaming; body() is the whole response once complete.
  void add(const Event& event);
  nlohmann::json body() const;

 private:
  nlohmann::json chunk(const std::string& text, const nlohmann::json& logprobs, const char* finish,
                       const std::string& reasoning = {}) const;
  nlohmann::json call_chunk(const nlohmann::json& delta) const;
  std::string call_id(size_t index) const;
  // "tool_calls" when the answer carried calls (unless cut by length), else the completion's reason.
  const char* finish_reason(size_t calls) const;
  nlohmann::json usage() const;
  nlohmann::json logprobs_of(const Event& event) const;

  std::string id_, model_;
  int64_t created_;
  const Tokenizer& tokenizer_;
  int32_t logprobs_;
  bool chat_;
  std::optional<AnswerFormat> answer_;
  bool parallel_;
  std::optional<AnswerParser> parser_;  // streaming's, when the answer is taken apart
  size_t calls_sent_ = 0;
  bool role_sent_ = false;
  std::string text_;
  nlohmann::json all_logprobs_ = nullptr;
  Completion completion_;
};

}  // namespace kvserve
