// libFuzzer target for the HTTP API's JSON path, without a socket: the first byte picks the
// route, the rest is the body, taken through what the server runs on its worker threads
// (parse with depth and field paths, validate, tokenize, render the chat template). Every body
// must be answered, never thrown on: a 200, or a 4xx whose message starts with the field it
// names; never the catch-all 500. A body accepted as a completion is then "generated" (its own
// prompt tokens, each with byte-token alternatives in its logprobs) through both reply shapes,
// streamed and whole: every byte sent must be valid UTF-8 and every SSE event valid JSON.
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "core/json_body.h"
#include "gguf/gguf.h"
#include "http/openai_routes.h"
#include "model/synthetic.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace {

struct Served {
  std::unique_ptr<kvserve::GgufFile> file;
  std::unique_ptr<kvserve::Tokenizer> tok;
  std::unique_ptr<kvserve::ChatTemplate> chat;
  std::vector<std::string> ids = {"m"};
  std::vector<int32_t> half_chars;  // tokens whose bytes are one byte of a longer character
};

const Served& served() {
  static Served s = [] {
    std::string path = std::string(KVSERVE_SHARED_DIR) + "/models/stories260K.gguf";
    if (!std::filesystem::exists(path)) {
      path = "/tmp/kvserve-fuzz-http-vocab.gguf";
      kvserve::write_synthetic_model({.dim = 8, .layers = 1, .heads = 2, .kv_heads = 1, .ffn = 8, .vocab = 600}, path);
    }
    Served out;
    out.file = std::make_unique<kvserve::GgufFile>(path);
    out.tok = std::make_unique<kvserve::Tokenizer>(*out.file);
    out.chat = std::make_unique<kvserve::ChatTemplate>(*out.file, *out.tok, "");
    for (int32_t id = 0; id < out.tok->vocab_size(); ++id) {
      const std::string b = out.tok->token_bytes(id);
      if (b.size() == 1 && static_cast<unsigned char>(b[0]) >= 0x80) out.half_chars.push_back(id);
    }
    return out;
  }();
  return s;
}

void check(bool ok) {
  if (!ok) std::abort();
}

bool json_text_ok(const std::string& text) {
  if (!kvserve::utf8_is_valid(text)) return false;
  try {
    (void)nlohmann::json::parse(text);
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const char* routes[] = {"/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize", "/apply-template"};
  const std::string url = routes[data[0] % 5];
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  const Served& s = served();
  const kvserve::RouteOutcome out = kvserve::answer_post(url, body, {*s.tok, *s.chat, s.ids, 512, 512});
  check(out.status != 500);
  if (!out.completion) {
    check(json_text_ok(out.body));
    if (out.status >= 400) {
      const std::string message = nlohmann::json::parse(out.body)["error"]["message"].get<std::string>();
      const size_t colon = message.find(':');
      check(colon != std::string::npos && colon > 0 && message.find(' ') > colon);
    }
    return 0;
  }
  // "Generate" the prompt back, with byte tokens among every token's alternatives.
  const kvserve::CompletionCall& cc = *out.completion;
  size_t whole_calls = 0, streamed_calls = 0;
  for (bool stream : {false, true}) {
    // Chat answers also go through the answer parser, in a format the prompt's length picks
    // (reasoning blocks and every tool-call format), unless the request set one.
    std::optional<kvserve::AnswerFormat> answer = cc.answer;
    if (out.chat && !answer) {
      answer.emplace();
      answer->tools = static_cast<kvserve::ToolFormat>(cc.request.prompt.size() % 7);
      answer->parse_tools = true;
      answer->reasoning = {"<think>", "</think>"};
      answer->reasoning_open = cc.request.prompt.size() % 2 == 1;
    }
    kvserve::CompletionWriter writer("cmpl-x", "m", 0, *s.tok, cc.logprobs < 0 ? 5 : cc.logprobs, out.chat, answer,
                                     cc.parallel_tool_calls);
    std::string sent;
    const size_t n = std::min<size_t>(cc.request.prompt.size(), 64);
    for (size_t i = 0; i <= n; ++i) {
      kvserve::Event ev;
      if (i < n) {
        const int32_t token = cc.request.prompt[i];
        ev.token_ids.push_back(token);
        kvserve::TokenLogprob lp{token, -1.0f, {}};
        for (size_t b = 0; b < s.half_chars.size() && b < 8; ++b) lp.top.emplace_back(s.half_chars[b], -2.0f);
        ev.logprobs.push_back(lp);
        ev.text = kvserve::valid_utf8(s.tok->token_bytes(token));  // the engine sends whole characters
      } else {
        ev.completion = kvserve::Completion{};
      }
      if (stream) sent += writer.stream_event(ev, cc.include_usage);
      else writer.add(ev);
    }
    if (!stream) {
      const std::string whole = kvserve::json_text(writer.body());
      check(json_text_ok(whole));
      whole_calls = nlohmann::json::parse(whole)["choices"][0].value("message", nlohmann::json::object()).value(
          "tool_calls", nlohmann::json::array()).size();
      continue;
    }
    check(kvserve::utf8_is_valid(sent));
    for (size_t at = 0; (at = sent.find("data: ", at)) != std::string::npos;) {
      const size_t end = sent.find("\n\n", at);
      const std::string event = sent.substr(at + 6, end - at - 6);
      if (event != "[DONE]") {
        check(json_text_ok(event));
        const nlohmann::json e = nlohmann::json::parse(event);
        if (e.contains("choices") && !e["choices"].empty() && e["choices"][0].contains("delta"))
          for (const auto& tc : e["choices"][0]["delta"].value("tool_calls", nlohmann::json::array()))
            if (tc.contains("id")) ++streamed_calls;
      }
      at = end;
    }
    check(streamed_calls == whole_calls);  // streamed and whole answers carry the same calls
  }
  return 0;
}
