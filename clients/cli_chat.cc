#include "cli_chat.h"

#include <httplib.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

namespace kvserve {
namespace {

using nlohmann::json;

// One streamed chat turn: prints the content deltas as they come; the whole answer, or nothing
// (with the reason on stderr) when the call failed.
bool stream_turn(httplib::Client& client, const ChatOptions& o, const std::string& model, const json& messages,
                 std::string* answer) {
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/chat/completions";
  req.body = json{{"model", model}, {"messages", messages}, {"max_tokens", o.max_tokens},
                  {"temperature", o.temperature}, {"stream", true}}.dump();
  req.set_header("Content-Type", "application/json");
  if (!o.token.empty()) req.set_header("Authorization", "Bearer " + o.token);
  std::string buffer, error;
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buffer.append(data, len);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos; buffer.erase(0, end + 2)) {
      const std::string event = buffer.substr(0, end);
      if (event.rfind("data: ", 0) != 0 || event == "data: [DONE]") continue;
      const json j = json::parse(event.substr(6), nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("error")) error = j["error"].value("message", "error");
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const json& delta = j["choices"][0]["delta"];
      if (delta.contains("content") && delta["content"].is_string()) {
        const std::string piece = delta["content"].get<std::string>();
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        *answer += piece;
      }
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  if (!client.send(req, res, err)) {
    std::fprintf(stderr, "kvserve-cli: no HTTP API answered at %s (%s): is kvserve running with server.http_listen?\n",
                 o.http.c_str(), httplib::to_string(err).c_str());
    return false;
  }
  if (res.status != 200) {
    const json body = json::parse(res.body, nullptr, false);
    std::fprintf(stderr, "kvserve-cli: HTTP %d: %s\n", res.status,
                 body.is_object() && body.contains("error") ? body["error"].value("message", res.body).c_str()
                                                            : res.body.c_str());
    return false;
  }
  std::printf("\n");
  if (!error.empty()) {
    std::fprintf(stderr, "kvserve-cli: the answer was cut: %s\n", error.c_str());
    return false;
  }
  return true;
}

}  // namespace

int cli_chat(const ChatOptions& o) {
  const size_t colon = o.http.rfind(':');
  if (colon == std::string::npos) {
    std::fprintf(stderr, "kvserve-cli: --http takes HOST:PORT, got '%s'\n", o.http.c_str());
    return 2;
  }
  httplib::Client client(o.http.substr(0, colon), std::stoi(o.http.substr(colon + 1)));
  client.set_read_timeout(600, 0);
  // The model's name, as the server lists it.
  httplib::Headers headers;
  if (!o.token.empty()) headers.emplace("Authorization", "Bearer " + o.token);
  auto models = client.Get("/v1/models", headers);
  if (!models || models->status != 200) {
    std::fprintf(stderr, "kvserve-cli: no HTTP API answered at %s%s\n", o.http.c_str(),
                 models ? (": HTTP " + std::to_string(models->status)).c_str() : "");
    return 1;
  }
  const json list = json::parse(models->body, nullptr, false);
  if (!list.is_object() || !list.contains("data") || list["data"].empty()) return 1;
  const std::string model = list["data"][0].value("id", "");
  const bool prompts = !o.quiet && isatty(STDIN_FILENO);
  if (prompts) std::printf("chatting with %s at %s (end with Ctrl-D)\n", model.c_str(), o.http.c_str());
  json messages = json::array();
  if (!o.system.empty()) messages.push_back({{"role", "system"}, {"content", o.system}});
  for (std::string line;;) {
    if (prompts) std::printf("> "), std::fflush(stdout);
    if (!std::getline(std::cin, line)) break;
    if (line.empty()) continue;
    messages.push_back({{"role", "user"}, {"content", line}});
    std::string answer;
    if (!stream_turn(client, o, model, messages, &answer)) return 1;
    messages.push_back({{"role", "assistant"}, {"content", answer}});
  }
  if (prompts) std::printf("\n");
  return 0;
}

}  // namespace kvserve
