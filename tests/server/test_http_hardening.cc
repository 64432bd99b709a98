// The real server's HTTP API against hostile and careless clients: bodies that used to end the
// process (bytes that are not UTF-8, numbers beyond a double, deep nesting, content parts of the
// wrong type), connections that never finish a request (half-closed, slowloris, too many from
// one address), restarts over the last run's connections, and what a whole reply, a cut
// stream, a request that can never fit and the prefix cache answer. After every hostile request
// the server still answers everyone else.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>
#include <vector>

#include "http_raw_client.h"
#include "gguf/gguf.h"
#include "model/synthetic.h"
#include "reference_decoder.h"
#include "text/tokenizer.h"
#include "server_process.h"
#include "test_support.h"

namespace kvserve {
namespace {

using nlohmann::json;
using testing::http_call;
using testing::RawReply;
using testing::shared_model;
using namespace std::chrono_literals;

int http_port_of(const testing::ServerProcess& server) {
  for (int i = 0; i < 200; ++i) {
    std::ifstream in(server.port_file() + ".http");
    int port = 0;
    if (in >> port && port > 0) return port;
    std::this_thread::sleep_for(20ms);
  }
  return 0;
}

std::vector<std::string> with_http(std::vector<std::string> args) {
  args.insert(args.end(), {"--set", "server.http_listen=\"127.0.0.1:0\"", "--set", "server.metrics_listen=\"\""});
  return args;
}

bool alive(const testing::ServerProcess& server) { return server.pid() > 0 && kill(server.pid(), 0) == 0; }

// A counter or gauge from /metrics ("name" or "name{labels}"), -1 if absent.
double metric(int port, const std::string& series) {
  const RawReply r = http_call(port, "GET", "/metrics");
  const size_t at = r.body.find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(r.body.substr(at + series.size() + 2));
}

// A synthetic model slow enough (~5 ms a token here) that a request can be cut while it runs.
std::string slow_model() {
  const std::string path = (std::filesystem::temp_directory_path() / "kvserve-http-hardening-slow.gguf").string();
  if (!std::filesystem::exists(path))
    write_synthetic_model({.dim = 512, .layers = 8, .heads = 8, .kv_heads = 8, .ffn = 1376, .vocab = 4096,
                           .context = 4096},
                          path);
  return path;
}

class HttpHardening : public ::testing::Test {
 protected:
  void start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=256"};
    args.insert(args.end(), extra.begin(), extra.end());
    server_ = std::make_unique<testing::ServerProcess>(with_http(args));
    ASSERT_TRUE(server_->started()) << server_->log();
    port_ = http_port_of(*server_);
    ASSERT_GT(port_, 0) << server_->log();
  }
  void SetUp() override { KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf")); }
  void TearDown() override {
    if (HasFailure() && server_) std::printf("--- server log (tail) ---\n%s\n", server_->log().substr(
        server_->log().size() > 6000 ? server_->log().size() - 6000 : 0).c_str());
  }
  RawReply post(const std::string& path, const std::string& body, const std::string& headers = {}) {
    return http_call(port_, "POST", path, body, headers);
  }
  std::unique_ptr<testing::ServerProcess> server_;
  int port_ = 0;
};

std::string nested(const std::string& open, const std::string& close, int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

TEST_F(HttpHardening, HostileBodiesGet400NamingTheFieldAndTheServerLives) {
  start();
  const std::string model = R"("model":"stories260K")";
  struct Case {
    const char* name;
    std::string path, body;
    int status;
    std::string message_starts;
  };
  const std::vector<Case> cases = {
      {"Latin-1 byte in the prompt", "/v1/completions", "{" + model + R"(,"prompt":"caf)" + "\xE9" + R"("})", 400,
       "prompt: not valid UTF-8"},
      {"Latin-1 byte in a chat message", "/v1/chat/completions",
       "{" + model + R"(,"messages":[{"role":"user","content":"caf)" + "\xE9" + R"("}]})", 400,
       "messages[0].content: not valid UTF-8"},
      {"a key that is not UTF-8", "/v1/completions", "{" + model + R"(,"pr)" + "\xFF" + R"(":1})", 400, ""},
      {"1e999", "/v1/completions", "{" + model + R"(,"prompt":"hi","temperature":1e999})", 400,
       "temperature: the number 1e999 is out of range"},
      {"-1e999 in max_tokens", "/v1/completions", "{" + model + R"(,"prompt":"hi","max_tokens":-1e999})", 400,
       "max_tokens: the number"},
      {"a content part whose type is a number", "/v1/chat/completions",
       "{" + model + R"(,"messages":[{"role":"user","content":[{"type":1,"text":"hi"}]}]})", 400,
       "messages[0].content[0].type: required, a string"},
      {"chat_template_kwargs not an object", "/v1/chat/completions",
       "{" + model + R"(,"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":[1]})", 400,
       "chat_template_kwargs: expected an object"},
      {"chat_template_kwargs replacing the messages", "/apply-template",
       R"({"messages":[{"role":"user","content":"hi"}],"chat_template_kwargs":{"messages":[]}})", 400,
       "chat_template_kwargs.messages"},
      {"the same on /apply-template", "/apply-template", R"({"messages":[{"role":"user","content":[{"type":1}]}]})", 400,
       "messages[0].content[0].type"},
      {"an image part", "/v1/chat/completions",
       "{" + model + R"(,"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]})", 400,
       "messages[0].content[0].type: 'image_url' is not supported"},
      {"content that is a number", "/v1/chat/completions", "{" + model + R"(,"messages":[{"role":"user","content":5}]})",
       400, "messages[0].content"},
      {"a role that is an object", "/v1/chat/completions", "{" + model + R"(,"messages":[{"role":{},"content":"x"}]})", 400,
       "messages[0].role"},
      {"50000 nested arrays in the prompt", "/v1/completions", "{" + model + R"(,"prompt":)" + nested("[", "]", 50000) + "}",
       400, "prompt[0][0]"},
      {"30000 nested arrays in a message", "/v1/chat/completions",
       "{" + model + R"(,"messages":[{"role":"user","content":"x","extra":)" + nested("[", "]", 30000) + "}]}", 400,
       "messages[0].extra"},
      {"100000 nested objects", "/tokenize", nested(R"({"a":)", "}", 100000), 400, "a.a.a"},
      {"nesting inside a template's values", "/apply-template",
       R"({"messages":[{"role":"user","content":"x","n":)" + nested("[", "]", 5000) + "}]}", 400, "messages[0].n"},
      {"a token id past 2^63", "/detokenize", R"({"tokens":[18446744073709551615]})", 400, "tokens[0]"},
      {"a negative token id", "/detokenize", R"({"tokens":[1,-1]})", 400, "tokens[1]"},
      {"a fractional token id", "/detokenize", R"({"tokens":[1.5]})", 400, "tokens[0]"},
      {"a body that is an array", "/v1/completions", "[]", 400, "body"},
      {"a body that is null", "/v1/chat/completions", "null", 400, "body"},
      {"trailing bytes", "/v1/completions", "{" + model + R"(,"prompt":"hi"} x)", 400, "body: not valid JSON"},
      {"max_tokens as a string", "/v1/completions", "{" + model + R"(,"prompt":"hi","max_tokens":"5"})", 400,
       "max_tokens"},
      {"cache_salt as a number", "/v1/completions", "{" + model + R"(,"prompt":"hi","cache_salt":7})", 400,
       "cache_salt"},
      {"a model name of a megabyte", "/v1/completions", R"({"model":")" + std::string(1 << 20, 'm') + R"(","prompt":"hi"})",
       404, "model"},
      {"add_special that is a string", "/tokenize", R"({"prompt":"hi","add_special":"no"})", 400, "add_special"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const RawReply r = post(c.path, c.body);
    ASSERT_EQ(r.status, c.status) << r.head << "\n" << r.body.substr(0, 400);
    const json err = json::parse(r.body);  // the reply is JSON, whatever the request's bytes
    const std::string message = err["error"]["message"].get<std::string>();
    EXPECT_EQ(message.rfind(c.message_starts, 0), 0u) << message;
    EXPECT_LT(message.size(), 600u) << "an error message should not echo a body";
    ASSERT_EQ(http_call(port_, "GET", "/health").status, 200) << "after " << c.name;
  }
  ASSERT_TRUE(alive(*server_));
  const RawReply ok = post("/v1/completions", "{" + model + R"(,"prompt":"Once upon a time","max_tokens":8})");
  EXPECT_EQ(ok.status, 200) << ok.body;
}

// Byte-fallback tokens (<0x8A> ...) are half characters: their text in logprobs, streamed or
// whole, completions or chat, must still be JSON (U+FFFD in "token", the exact bytes in
// "bytes"). Many high-temperature tokens with 20 alternatives each list such tokens.
TEST_F(HttpHardening, LogprobsListingByteTokensAreValidJson) {
  // Random weights over a vocabulary that is half byte tokens: every list of 20 has some.
  const std::string model = (std::filesystem::temp_directory_path() / "kvserve-http-hardening-bytes.gguf").string();
  write_synthetic_model({.vocab = 512, .seed = 5}, model);
  server_ = std::make_unique<testing::ServerProcess>(with_http({"--model", model}));
  ASSERT_TRUE(server_->started()) << server_->log();
  port_ = http_port_of(*server_);
  int byte_tokens = 0;
  for (bool stream : {false, true}) {
    for (bool chat : {false, true}) {
      json body = {{"model", "kvserve-http-hardening-bytes"}, {"max_tokens", 200}, {"temperature", 3.0}, {"seed", 11},
                   {"ignore_eos", true}, {"stream", stream}};
      if (chat) {
        body["messages"] = {{{"role", "user"}, {"content", "Tell me a story"}}};
        body["logprobs"] = true;
        body["top_logprobs"] = 20;
      } else {
        body["prompt"] = "Once upon a time";
        body["logprobs"] = 5;
      }
      const RawReply r = post(chat ? "/v1/chat/completions" : "/v1/completions", body.dump());
      ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
      if (!stream) {
        const json whole = json::parse(r.body);
        if (chat)
          for (const json& t : whole["choices"][0]["logprobs"]["content"])
            for (const json& alt : t["top_logprobs"])
              if (alt["bytes"].size() == 1 && alt["bytes"][0].get<int>() >= 0x80) {
                ++byte_tokens;
                EXPECT_EQ(alt["token"], "\xEF\xBF\xBD");
              }
      } else {
        EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos);
        EXPECT_EQ(r.body.find("\"error\""), std::string::npos) << r.body.substr(0, 300);
      }
    }
  }
  EXPECT_GT(byte_tokens, 0) << "no byte token was listed: the test did not test";
  EXPECT_TRUE(alive(*server_));
}

// A restart binds at once although the last run's connections linger (SO_REUSEADDR), and a
// second live server on the port is still refused (no SO_REUSEPORT).
TEST_F(HttpHardening, RestartBindsAtOnceAndASecondLiveServerIsRefused) {
  start();
  const int port = port_;
  // A connection the server is holding when it dies leaves its side of it behind.
  const int held = testing::connect_from(port);
  ASSERT_GE(held, 0);
  ASSERT_TRUE(testing::send_all(held, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  testing::read_until_close(held, 300ms);
  server_->signal(SIGKILL);
  server_->wait_exit(10s);
  std::this_thread::sleep_for(100ms);
  const std::string at = "server.http_listen=\"127.0.0.1:" + std::to_string(port) + "\"";
  testing::ServerProcess again({"--model", shared_model("stories260K.gguf"), "--set", at, "--set", "server.metrics_listen=\"\""});
  ASSERT_TRUE(again.started()) << again.log();
  ASSERT_EQ(http_port_of(again), port) << again.log();
  EXPECT_EQ(http_call(port, "GET", "/health").status, 200);
  testing::ServerProcess second({"--model", shared_model("stories260K.gguf"), "--set", at, "--set", "server.metrics_listen=\"\""});
  EXPECT_NE(second.wait_exit(30s), 0) << second.log();
  EXPECT_NE(second.log().find("cannot listen"), std::string::npos) << second.log();
  EXPECT_EQ(http_call(port, "GET", "/health").status, 200) << "the first server still serves";
  close(held);
}

// Connections that never complete a request are cut: half-closed ones within about half a
// second, slow ones at the header deadline; one address cannot hold more than its share, and
// another address is served all the while.
TEST_F(HttpHardening, UnfinishedRequestsAreCutAndOneAddressCannotHoldThePort) {
  start({"--set", "server.http_header_timeout_ms=2500", "--set", "server.http_max_connections_per_client=24"});
  using Clock = std::chrono::steady_clock;
  // Half-closed: a few header bytes, then the client's side shut.
  const int half = testing::connect_from(port_);
  ASSERT_TRUE(testing::send_all(half, "POST /v1/completions HTTP/1.1\r\nHost"));
  shutdown(half, SHUT_WR);
  const auto t0 = Clock::now();
  bool closed = false;
  testing::read_until_close(half, 2000ms, &closed);
  EXPECT_TRUE(closed) << "a half-closed connection was kept";
  EXPECT_LT(Clock::now() - t0, 2000ms);
  close(half);

  // Slowloris: 16 connections that send a header byte every 200 ms are cut at the deadline.
  std::vector<int> slow;
  for (int i = 0; i < 16; ++i) {
    slow.push_back(testing::connect_from(port_));
    ASSERT_GE(slow.back(), 0);
    testing::send_all(slow.back(), "GET /health HTTP/1.1\r\n");
  }
  const auto t1 = Clock::now();
  int cut = 0;
  while (Clock::now() - t1 < 5s && cut < 16) {
    cut = 0;
    for (int fd : slow)
      if (!testing::send_all(fd, "X") || [&] {
            bool c = false;
            testing::read_until_close(fd, 1ms, &c);
            return c;
          }())
        ++cut;
    // Another address is answered while they trickle.
    EXPECT_EQ(http_call(port_, "GET", "/health", {}, {}, "127.0.0.2", 2s).status, 200);
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_EQ(cut, 16) << "slow connections outlived the header deadline";
  EXPECT_GT(Clock::now() - t1, 2000ms) << "cut before the deadline";
  for (int fd : slow) close(fd);

  // One address holds at most its cap (24): the 25th connection is closed at once; another
  // address still gets in.
  std::this_thread::sleep_for(300ms);
  std::vector<int> idle;
  for (int i = 0; i < 24; ++i) idle.push_back(testing::connect_from(port_));
  std::this_thread::sleep_for(200ms);
  const int extra = testing::connect_from(port_);
  bool refused = extra < 0;
  if (!refused) {
    testing::send_all(extra, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
    bool c = false;
    const std::string got = testing::read_until_close(extra, 1000ms, &c);
    refused = c && got.empty();
    close(extra);
  }
  EXPECT_TRUE(refused) << "a 25th connection from one address was served";
  EXPECT_EQ(http_call(port_, "GET", "/health", {}, {}, "127.0.0.2", 2s).status, 200);
  for (int fd : idle) close(fd);
  EXPECT_TRUE(alive(*server_));
}

// A whole (non-streamed) reply whose client leaves is cancelled, not generated for nobody.
TEST_F(HttpHardening, WholeReplyIsCancelledWhenItsClientLeaves) {
  server_ = std::make_unique<testing::ServerProcess>(with_http({"--model", slow_model(), "--set", "cache.num_blocks=512"}));
  ASSERT_TRUE(server_->started()) << server_->log();
  port_ = http_port_of(*server_);
  const int fd = testing::connect_from(port_);
  const std::string body = json{{"model", "kvserve-http-hardening-slow"}, {"prompt", "a b c"}, {"max_tokens", 3000},
                                {"ignore_eos", true}}.dump();
  ASSERT_TRUE(testing::send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                    "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  std::this_thread::sleep_for(500ms);
  close(fd);
  const auto t0 = std::chrono::steady_clock::now();
  double cancelled = -1;
  while (std::chrono::steady_clock::now() - t0 < 5s) {
    cancelled = metric(port_, "kvserve:request_success_total{finished_reason=\"cancelled\"}");
    if (cancelled >= 1) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(cancelled, 1) << server_->log();
  EXPECT_LT(metric(port_, "kvserve:generation_tokens_total"), 3000);
}

// A drain that cuts generations off tells the client so: a whole reply is a 503 error object, a
// stream ends with an error event before [DONE]; neither is a 200 with truncated text. /ready
// turns 503 as the drain starts, before the streams are cut.
TEST_F(HttpHardening, CutOffRepliesAreErrorsNotTruncatedSuccesses) {
  server_ = std::make_unique<testing::ServerProcess>(
      with_http({"--model", slow_model(), "--set", "cache.num_blocks=512", "--set", "server.shutdown_grace_ms=300"}));
  ASSERT_TRUE(server_->started()) << server_->log();
  port_ = http_port_of(*server_);
  json body = {{"model", "kvserve-http-hardening-slow"}, {"prompt", "a b c"}, {"max_tokens", 3000}, {"ignore_eos", true}};
  const std::string whole_body = body.dump();
  body["stream"] = true;
  const std::string stream_body = body.dump();
  RawReply whole, streamed;
  std::thread a([&] { whole = http_call(port_, "POST", "/v1/completions", whole_body); });
  std::thread b([&] { streamed = http_call(port_, "POST", "/v1/completions", stream_body); });
  std::this_thread::sleep_for(700ms);
  EXPECT_EQ(http_call(port_, "GET", "/ready").status, 200);
  server_->signal(SIGTERM);
  // Unready from the start of the drain, while the two generations still run.
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(http_call(port_, "GET", "/ready").status, 503);
  a.join();
  b.join();
  EXPECT_EQ(whole.status, 503) << whole.body.substr(0, 300);
  EXPECT_NE(whole.body.find("\"error\""), std::string::npos) << whole.body.substr(0, 300);
  EXPECT_EQ(streamed.status, 200);
  const size_t error = streamed.body.find("data: {\"error\"");
  ASSERT_NE(error, std::string::npos) << streamed.body.substr(streamed.body.size() > 400 ? streamed.body.size() - 400 : 0);
  EXPECT_LT(error, streamed.body.find("data: [DONE]"));
  EXPECT_EQ(streamed.body.find("\"finish_reason\":\"abort\""), std::string::npos);
}

// A request that can never fit is the request's fault (400, which OpenAI clients do not
// retry), not a 429; a chat without max_tokens is sized to what the cache holds.
TEST_F(HttpHardening, NeverFitsIs400AndChatIsSizedToTheCache) {
  start({"--set", "cache.num_blocks=8", "--set", "cache.block_size=16", "--set", "scheduler.max_model_len=512"});
  EXPECT_NE(server_->log().find("smaller than one full-length request"), std::string::npos);
  const RawReply big = post("/v1/completions", R"({"model":"stories260K","prompt":"Once","max_tokens":400})");
  EXPECT_EQ(big.status, 400) << big.body;
  EXPECT_NE(big.body.find("invalid_request_error"), std::string::npos) << big.body;
  EXPECT_NE(big.body.find("max_tokens"), std::string::npos) << big.body;
  const RawReply chat = post("/v1/chat/completions",
                             R"({"model":"stories260K","messages":[{"role":"user","content":"Hi"}],"ignore_eos":true})");
  ASSERT_EQ(chat.status, 200) << chat.body;
  const json usage = json::parse(chat.body)["usage"];
  EXPECT_EQ(usage["total_tokens"].get<int>(), 8 * 16) << usage;
}

// Each HTTP request is counted once in the Prometheus series.
TEST_F(HttpHardening, MetricsCountEachRequestOnce) {
  start();
  for (int i = 0; i < 3; ++i)
    ASSERT_EQ(post("/v1/completions", R"({"model":"stories260K","prompt":"Once","max_tokens":4})").status, 200);
  EXPECT_EQ(metric(port_, "kvserve:e2e_request_latency_seconds_count"), 3);
  EXPECT_EQ(metric(port_, "kvserve:request_success_total{finished_reason=\"length\"}"), 3);
}

// With bearer tokens, tenants never share prefix-cache blocks: B cannot tell from its
// cached_tokens that A sent the same prompt. Within a tenant the cache still works, and
// cache_salt partitions further.
TEST_F(HttpHardening, TenantsDoNotShareThePrefixCache) {
  const auto tokens = std::filesystem::temp_directory_path() / ("kvserve-salt-" + std::to_string(getpid()));
  std::ofstream(tokens) << "tenant-a\ntenant-b\n";
  start({"--set", "server.auth_token_file=\"" + tokens.string() + "\"", "--set", "cache.block_size=8"});
  const std::string prompt = "Once upon a time there was a little girl who lived in a village near the forest.";
  auto cached = [&](const std::string& token, const std::string& extra = {}) {
    const RawReply r = post("/v1/completions",
                            R"({"model":"stories260K","max_tokens":2,"prompt":")" + prompt + "\"" + extra + "}",
                            "Authorization: Bearer " + token + "\r\n");
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body)["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };
  EXPECT_EQ(cached("tenant-a"), 0);
  EXPECT_GT(cached("tenant-a"), 0) << "the same tenant reuses its prefix";
  EXPECT_EQ(cached("tenant-b"), 0) << "another tenant saw tenant a's prompt in the cache";
  EXPECT_EQ(cached("tenant-a", R"(,"cache_salt":"s1")"), 0);
  EXPECT_GT(cached("tenant-a", R"(,"cache_salt":"s1")"), 0);
  std::filesystem::remove(tokens);
}

TEST_F(HttpHardening, ModelsByIdAnswerAsOpenAIDoes) {
  start();
  const RawReply one = http_call(port_, "GET", "/v1/models/stories260K");
  ASSERT_EQ(one.status, 200) << one.body;
  EXPECT_EQ(json::parse(one.body)["id"], "stories260K");
  EXPECT_EQ(http_call(port_, "GET", "/v1/models/gpt-4").status, 404);
}

}  // namespace
}  // namespace kvserve

namespace kvserve {
namespace {

// A client's X-Request-Id names its generation in the registry both front ends share: POST
// /abort with it ends the generation (a whole reply then comes back at once, with far fewer
// tokens than asked), a second live request under the same id is refused, and an id that is
// not live, or malformed, is answered as the gRPC Abort answers it.
TEST(HttpAbort, ClientRequestIdsAreLiveAndAbortable) {
  testing::ServerProcess server(with_http({"--model", slow_model(), "--set", "cache.num_blocks=512"}));
  ASSERT_TRUE(server.started()) << server.log();
  const int port = http_port_of(server);
  ASSERT_GT(port, 0);
  const std::string body = json{{"model", "kvserve-http-hardening-slow"}, {"prompt", "a b c"}, {"max_tokens", 3000},
                                {"ignore_eos", true}}.dump();
  const int fd = testing::connect_from(port);
  ASSERT_TRUE(testing::send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                    "X-Request-Id: job-17\r\nContent-Length: " + std::to_string(body.size()) +
                                    "\r\nConnection: close\r\n\r\n" + body));
  std::this_thread::sleep_for(500ms);
  const RawReply dup = http_call(port, "POST", "/v1/completions", body, "X-Request-Id: job-17\r\n");
  EXPECT_EQ(dup.status, 409) << dup.body;
  EXPECT_NE(dup.body.find("x-request-id"), std::string::npos) << dup.body;

  const auto t0 = std::chrono::steady_clock::now();
  const RawReply found = http_call(port, "POST", "/abort", R"({"request_id":"job-17"})");
  EXPECT_EQ(found.status, 200) << found.body;
  EXPECT_EQ(json::parse(found.body, nullptr, false).value("found", false), true) << found.body;
  const RawReply whole = testing::parse_reply(testing::read_until_close(fd, 10s));
  close(fd);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
  const json reply = json::parse(whole.body, nullptr, false);
  ASSERT_TRUE(reply.is_object()) << whole.status << " " << whole.body;
  if (whole.status == 200) {
    EXPECT_EQ(reply["id"], "cmpl-job-17");
    EXPECT_LT(reply["usage"]["completion_tokens"].get<int>(), 3000);
  }
  EXPECT_EQ(metric(port, "kvserve:request_success_total{finished_reason=\"cancelled\"}"), 1) << server.log();

  // Ended: the id is free again and no longer found.
  const RawReply again = http_call(port, "POST", "/abort", R"({"request_id":"job-17"})");
  EXPECT_EQ(json::parse(again.body, nullptr, false).value("found", true), false) << again.body;
  const RawReply bad = http_call(port, "POST", "/abort", R"({"request_id":""})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("request_id"), std::string::npos) << bad.body;
  const RawReply missing = http_call(port, "POST", "/abort", R"({})");
  EXPECT_EQ(missing.status, 400);
  const RawReply bad_header = http_call(port, "POST", "/v1/completions", body, "X-Request-Id: \x01\r\n");
  EXPECT_EQ(bad_header.status, 400) << bad_header.body;
}

}  // namespace
}  // namespace kvserve

namespace kvserve {
namespace {

// POST /v1/head_importance runs the workflow gRPC's HeadImportance runs (server/core), checked
// against the independent float64 decoder: the baseline, the top head zeroed alone, the ranking
// order and the budget; bad input is refused naming the field.
TEST(HttpHeadImportance, AnswersAsTheReferenceDecoderScoresAndRefusesBadInput) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  testing::ServerProcess server(with_http({"--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=256"}));
  ASSERT_TRUE(server.started()) << server.log();
  const int port = http_port_of(server);
  ASSERT_GT(port, 0);
  const std::string text = "Once upon a time, there was a little girl named Lily. She loved to play outside.";
  const RawReply r = http_call(port, "POST", "/v1/head_importance", json{{"prompt", text}, {"loss_budget", 0.02}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  const json imp = json::parse(r.body);
  GgufFile file(shared_model("stories260K.gguf"));
  Tokenizer tok(file);
  const std::vector<int32_t> ids = tok.encode(text, true);
  const int n = static_cast<int>(ids.size());
  testing::ReferenceDecoder ref(file);
  EXPECT_EQ(imp["object"], "head_importance");
  EXPECT_EQ(imp["n_tokens"], n - 1);
  EXPECT_EQ(imp["loss_budget"], 0.02);
  EXPECT_NEAR(imp["baseline_mean_logprob"].get<double>(), ref.run(ids).prompt_logprob_sum / (n - 1), 1e-4);
  const json& heads = imp["heads"];
  ASSERT_EQ(heads.size(), 40u);
  for (size_t i = 1; i < heads.size(); ++i) EXPECT_GE(heads[i - 1]["drop"].get<double>(), heads[i]["drop"].get<double>());
  const json& top = heads[0];
  const double top_mean =
      ref.run(ids, {{top["layer"].get<int32_t>(), top["head"].get<int32_t>()}}).prompt_logprob_sum / (n - 1);
  EXPECT_NEAR(top["mean_logprob"].get<double>(), top_mean, 1e-4);
  EXPECT_LE(imp["prunable_measured_drop"].get<double>(), 0.02);
  for (const json& h : imp["prunable"]) EXPECT_TRUE(h.contains("layer") && h.contains("head"));
  // The same prompt as ids answers the same.
  const RawReply by_ids = http_call(port, "POST", "/v1/head_importance", json{{"prompt_token_ids", ids}, {"loss_budget", 0.02}}.dump());
  ASSERT_EQ(by_ids.status, 200) << by_ids.body;
  EXPECT_EQ(json::parse(by_ids.body)["heads"][0], top);

  for (const auto& [body, field] : std::vector<std::pair<std::string, std::string>>{
           {R"({"prompt": "Once upon a time", "loss_budget": -1})", "loss_budget"},
           {R"({"prompt": "Once upon a time", "loss_budget": "a lot"})", "loss_budget"},
           {R"({"prompt": "Once upon a time", "budget": 1})", "budget"},
           {R"({"prompt": 7})", "prompt"},
           {R"({"prompt_token_ids": [1, -4]})", "prompt_token_ids[1]"},
           {R"({})", "prompt"},
           {R"([1, 2])", "body"}}) {
    const RawReply bad = http_call(port, "POST", "/v1/head_importance", body);
    EXPECT_EQ(bad.status, 400) << body << " -> " << bad.body;
    EXPECT_NE(bad.body.find(field), std::string::npos) << body << " -> " << bad.body;
  }
  EXPECT_EQ(http_call(port, "GET", "/v1/head_importance").status, 405);
  EXPECT_TRUE(alive(server));
}

// A client that goes away mid-call cancels the work and gives its inspection slot back: with one
// slot, the next call is served, not refused.
TEST(HttpHeadImportance, AClientThatGoesAwayGivesItsSlotBack) {
  testing::ServerProcess server(with_http({"--model", slow_model(), "--set", "cache.num_blocks=512", "--set",
                                           "server.max_inspect_calls=1", "--set", "server.inspect_max_tokens=512"}));
  ASSERT_TRUE(server.started()) << server.log();
  const int port = http_port_of(server);
  ASSERT_GT(port, 0);
  std::string words;
  for (int i = 0; i < 120; ++i) words += "w" + std::to_string(i) + " ";
  const std::string body = json{{"prompt", words}}.dump();
  const int fd = testing::connect_from(port);
  ASSERT_TRUE(testing::send_all(fd, "POST /v1/head_importance HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                                    "Content-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body));
  std::this_thread::sleep_for(300ms);
  // Still running: the one slot is taken.
  const RawReply busy = http_call(port, "POST", "/v1/head_importance", R"({"prompt": "a b c"})");
  EXPECT_EQ(busy.status, 429) << busy.body;
  EXPECT_NE(busy.body.find("server.max_inspect_calls"), std::string::npos) << busy.body;
  close(fd);
  // The whole call takes ~11 s here; cancelled, the slot is back within a step or two.
  RawReply next;
  for (int i = 0; i < 50; ++i) {
    next = http_call(port, "POST", "/v1/head_importance", R"({"prompt": "a b c"})");
    if (next.status != 429) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_EQ(next.status, 200) << next.body << "\n" << server.log();
}

}  // namespace
}  // namespace kvserve
