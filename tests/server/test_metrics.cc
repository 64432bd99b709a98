// The Prometheus endpoint, scraped during a load and after it: the vLLM-style names are there,
// gauges move with the load, counters and histogram counts add up to what was served. Idle and
// trickling connections do not hold up a scrape; with metrics_auth a scrape needs a token.
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <regex>
#include <thread>

#include "kvserve.grpc.pb.h"
#include "prometheus_text.h"
#include "server_process.h"
#include "test_support.h"

namespace kvserve {
namespace {

namespace pb = kvserve::v1;
using testing::shared_model;

double value_of(const std::string& text, const std::string& series) { return testing::metric_value(text, series); }

int metrics_port(const testing::ServerProcess& server) { return server.written_port(".metrics"); }
int http_port(const testing::ServerProcess& server) { return server.written_port(".http"); }

// Runs n gRPC requests of `tokens` tokens each (ignoring EOS) at once and scrapes /metrics every
// 5 ms until all are done, handing each scrape's body to on_scrape; returns the scrape count.
template <typename OnScrape>
int scrape_during_load(const testing::ServerProcess& server, httplib::Client& http, int n, int tokens,
                       OnScrape on_scrape) {
  auto stub = pb::Inference::NewStub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  std::atomic<int> done = 0;
  std::vector<std::thread> load;
  for (int i = 0; i < n; ++i)
    load.emplace_back([&] {
      pb::GenerateRequest req;
      req.set_prompt("Once upon a time");
      req.mutable_sampling()->set_max_new_tokens(tokens);
      req.mutable_sampling()->set_ignore_eos(true);
      grpc::ClientContext ctx;
      auto reader = stub->Generate(&ctx, req);
      pb::GenerateResponse resp;
      while (reader->Read(&resp)) {
      }
      EXPECT_TRUE(reader->Finish().ok());
      ++done;
    });
  int scrapes = 0;
  while (done < n) {
    auto res = http.Get("/metrics");
    EXPECT_TRUE(res) << "scrape failed";
    if (res) {
      EXPECT_EQ(res->status, 200);
      on_scrape(res->body);
    }
    ++scrapes;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : load) t.join();
  return scrapes;
}

// A raw loopback connection that sends `text` and keeps the socket open.
int open_and_send(int port, const std::string& text) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return -1;
  if (!text.empty() && send(fd, text.data(), text.size(), MSG_NOSIGNAL) < 0) return -1;
  return fd;
}

TEST(Metrics, IdleAndTricklingClientsDoNotHoldUpAScrape) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  testing::ServerProcess server({"--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=64", "--set",
                                 "server.metrics_listen=\"127.0.0.1:0\"", "--set", "server.log_level=\"warn\""});
  ASSERT_TRUE(server.started()) << server.log();
  const int mport = metrics_port(server);
  ASSERT_GT(mport, 0);
  // 8 connections that start a request and never finish it, 12 that trickle a byte every
  // second, and 40 that connect and say nothing (the old server had 8 worker threads).
  std::vector<int> fds;
  for (int i = 0; i < 8; ++i) fds.push_back(open_and_send(mport, "GET /metrics HTTP/1.1\r\n"));
  std::vector<int> trickle;
  for (int i = 0; i < 12; ++i) trickle.push_back(open_and_send(mport, "G"));
  for (int i = 0; i < 40; ++i) fds.push_back(open_and_send(mport, ""));
  for (int fd : fds) ASSERT_GE(fd, 0);
  std::atomic<bool> stop = false;
  std::thread trickler([&] {
    const std::string rest = "ET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    for (size_t i = 0; !stop; ++i) {
      for (int fd : trickle) send(fd, &rest[i % rest.size()], 1, MSG_NOSIGNAL);
      for (int k = 0; k < 10 && !stop; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  // Three scrapes, each on a fresh connection, each answered at once (a 3 s timeout would
  // fail them if a worker had to come free first).
  for (int i = 0; i < 3; ++i) {
    httplib::Client http("127.0.0.1", mport);
    http.set_connection_timeout(3);
    http.set_read_timeout(3);
    auto res = http.Get("/metrics");
    ASSERT_TRUE(res) << "scrape " << i << " did not complete";
    EXPECT_EQ(res->status, 200);
    EXPECT_GE(value_of(res->body, "kvserve:num_requests_running"), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  stop = true;
  trickler.join();
  for (int fd : fds) close(fd);
  for (int fd : trickle) close(fd);
}

TEST(Metrics, BearerTokenWhenMetricsAuthIsOn) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  const std::string tokens = std::filesystem::temp_directory_path() / ("kvserve-metrics-tokens-" + std::to_string(getpid()));
  std::ofstream(tokens) << "scrape-token\n";
  testing::ServerProcess server({"--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=64", "--set",
                                 "server.metrics_listen=\"127.0.0.1:0\"", "--set", "server.metrics_auth=true", "--set",
                                 "server.auth_token_file=\"" + tokens + "\"", "--set", "server.log_level=\"warn\""});
  ASSERT_TRUE(server.started()) << server.log();
  const int mport = metrics_port(server);
  ASSERT_GT(mport, 0);
  httplib::Client http("127.0.0.1", mport);
  auto none = http.Get("/metrics");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->body.find("kvserve:"), std::string::npos);
  auto wrong = http.Get("/metrics", {{"Authorization", "Bearer nope"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  auto right = http.Get("/metrics", {{"Authorization", "Bearer scrape-token"}});
  ASSERT_TRUE(right);
  EXPECT_EQ(right->status, 200);
  EXPECT_GE(value_of(right->body, "kvserve:num_requests_running"), 0);
  auto elsewhere = http.Get("/other", {{"Authorization", "Bearer scrape-token"}});
  ASSERT_TRUE(elsewhere);
  EXPECT_EQ(elsewhere->status, 404);
  std::filesystem::remove(tokens);
}

TEST(Metrics, ScrapedDuringAndAfterALoad) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  testing::ServerProcess server({"--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=256",
                                 "--set", "server.metrics_listen=\"127.0.0.1:0\"", "--set", "server.log_level=\"warn\""});
  ASSERT_TRUE(server.started()) << server.log();
  const int mport = metrics_port(server);
  ASSERT_GT(mport, 0);
  httplib::Client http("127.0.0.1", mport);
  const int n = 12, tokens = 400;
  double max_running = 0, max_usage = 0;
  scrape_during_load(server, http, n, tokens, [&](const std::string& m) {
    max_running = std::max(max_running, value_of(m, "kvserve:num_requests_running"));
    max_usage = std::max(max_usage, value_of(m, "kvserve:kv_cache_usage_perc"));
  });
  EXPECT_GE(max_running, 1);
  EXPECT_GT(max_usage, 0);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  const std::string& m = res->body;
  for (const char* name : {"kvserve:num_requests_waiting", "kvserve:num_preemptions_total", "kvserve:prompt_tokens_total",
                           "kvserve:prefix_cache_hit_rate"})
    EXPECT_GE(value_of(m, name), 0) << name << " missing";
  EXPECT_EQ(value_of(m, "kvserve:generation_tokens_total"), n * tokens);
  EXPECT_EQ(value_of(m, "kvserve:num_requests_running"), 0);
  EXPECT_EQ(value_of(m, "kvserve:time_to_first_token_seconds_count"), n);
  EXPECT_EQ(value_of(m, "kvserve:e2e_request_latency_seconds_count"), n);
  EXPECT_EQ(value_of(m, "kvserve:e2e_request_latency_seconds_bucket{le=\"+Inf\"}"), n);
  EXPECT_EQ(value_of(m, "kvserve:inter_token_latency_seconds_count"), n * (tokens - 1));
  EXPECT_EQ(value_of(m, "kvserve:request_success_total{finished_reason=\"length\"}"), n);
  EXPECT_NE(m.find("# TYPE kvserve:time_to_first_token_seconds histogram"), std::string::npos);
}

// The Gateway API Inference Extension's model-server protocol, scraped where its endpoint picker
// scrapes (the HTTP port's /metrics) while more requests arrive than run at once: each series
// under vLLM's name and type, the same figures as kvserve's own series in the same scrape (one
// engine snapshot), queue and batch seen, KV usage a fraction that rises with the load and is
// 0 again when idle, and cache_config_info the cache's real block size and count. /ready is 200.
TEST(Metrics, ModelServerProtocolForTheInferenceGateway) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  testing::ServerProcess server({"--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=200",
                                 "--set", "cache.block_size=8", "--set", "scheduler.max_num_seqs=3",
                                 "--set", "server.log_level=\"warn\""});
  ASSERT_TRUE(server.started()) << server.log();
  const int port = http_port(server);
  ASSERT_GT(port, 0);
  httplib::Client http("127.0.0.1", port);
  auto ready = http.Get("/ready");
  ASSERT_TRUE(ready);
  EXPECT_EQ(ready->status, 200);
  const int n = 9, tokens = 300;
  double max_waiting = 0, max_running = 0, max_usage = 0;
  const int scrapes = scrape_during_load(server, http, n, tokens, [&](const std::string& m) {
    const double waiting = value_of(m, "vllm:num_requests_waiting"), running = value_of(m, "vllm:num_requests_running");
    const double usage = value_of(m, "vllm:kv_cache_usage_perc");
    EXPECT_EQ(waiting, value_of(m, "kvserve:num_requests_waiting") + value_of(m, "kvserve:num_requests_waiting_background"));
    EXPECT_EQ(running, value_of(m, "kvserve:num_requests_running"));
    EXPECT_LE(running, 3);
    EXPECT_EQ(usage, value_of(m, "kvserve:kv_cache_usage_perc"));
    EXPECT_EQ(usage, value_of(m, "vllm:gpu_cache_usage_perc"));
    EXPECT_TRUE(usage >= 0 && usage <= 1) << usage;
    max_waiting = std::max(max_waiting, waiting);
    max_running = std::max(max_running, running);
    max_usage = std::max(max_usage, usage);
  });
  EXPECT_GE(max_waiting, 1) << scrapes << " scrapes";
  EXPECT_EQ(max_running, 3);
  EXPECT_GT(max_usage, 0);
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  const std::string& m = res->body;
  EXPECT_EQ(value_of(m, "vllm:num_requests_waiting"), 0);
  EXPECT_EQ(value_of(m, "vllm:num_requests_running"), 0);
  EXPECT_EQ(value_of(m, "vllm:kv_cache_usage_perc"), 0);
  EXPECT_EQ(value_of(m, "vllm:generation_tokens_total"), n * tokens);
  EXPECT_EQ(value_of(m, "vllm:prompt_tokens_total"), value_of(m, "kvserve:prompt_tokens_total"));
  EXPECT_GE(value_of(m, "vllm:prefix_cache_queries_total"), value_of(m, "vllm:prefix_cache_hits_total"));
  EXPECT_EQ(value_of(m, "vllm:cache_config_info{block_size=\"8\",num_gpu_blocks=\"200\",num_cpu_blocks=\"0\","
                        "enable_prefix_caching=\"True\"}"),
            1);
  // No LoRA adapters, said as the endpoint picker wants it said; the value is a recent time.
  const double lora = value_of(m, "vllm:lora_requests_info{max_lora=\"0\",running_lora_adapters=\"\",waiting_lora_adapters=\"\"}");
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(lora, now, 60);
  for (const char* g : {"vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
                        "vllm:cache_config_info", "vllm:lora_requests_info"})
    EXPECT_NE(m.find(std::string("# TYPE ") + g + " gauge\n"), std::string::npos) << g;
  for (const char* c : {"vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total", "vllm:generation_tokens_total"})
    EXPECT_NE(m.find(std::string("# TYPE ") + c + " counter\n"), std::string::npos) << c;
}

}  // namespace
}  // namespace kvserve
