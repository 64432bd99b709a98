// The Prometheus endpoint, scraped during a load and after it: the vLLM-style names are there,
// gauges move with the load, counters and histogram counts add up to what was served.
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <atomic>
#include <regex>
#include <thread>

#include "kvserve.grpc.pb.h"
#include "server_process.h"
#include "test_support.h"

namespace kvserve {
namespace {

namespace pb = kvserve::v1;
using testing::shared_model;

double value_of(const std::string& text, const std::string& series) {
  std::smatch m;
  const std::regex re("(^|\\n)" + std::regex_replace(series, std::regex(R"([{}"+.])"), R"(\$&)") + " ([0-9.e+-]+)");
  if (!std::regex_search(text, m, re)) return -1;
  return std::stod(m[2]);
}

TEST(Metrics, ScrapedDuringAndAfterALoad) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  testing::ServerProcess server({"--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=256",
                                 "--set", "server.metrics_listen=\"127.0.0.1:0\"", "--set", "server.log_level=\"warn\""});
  ASSERT_TRUE(server.started()) << server.log();
  int mport = 0;
  for (int i = 0; i < 100 && mport == 0; ++i) {
    std::ifstream in(server.port_file() + ".metrics");
    if (!(in >> mport)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(mport, 0);
  httplib::Client http("127.0.0.1", mport);
  auto stub = pb::Inference::NewStub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));

  const int n = 12, tokens = 400;
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
  double max_running = 0, max_usage = 0;
  while (done < n) {
    auto res = http.Get("/metrics");
    ASSERT_TRUE(res) << "scrape failed";
    EXPECT_EQ(res->status, 200);
    max_running = std::max(max_running, value_of(res->body, "kvserve:num_requests_running"));
    max_usage = std::max(max_usage, value_of(res->body, "kvserve:kv_cache_usage_perc"));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& t : load) t.join();
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

}  // namespace
}  // namespace kvserve
