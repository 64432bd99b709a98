// The soak over the HTTP API (ctest label "soak"): 1,000 streamed /v1/completions requests of
// mixed lengths at concurrency 256, a fifth cancelled by the client dropping its connection at a
// random point (before the first event for some), some with stop strings. Every request not
// cancelled completes with exactly its solo text; afterwards nothing runs or waits, every KV block
// is free, and resident memory did not grow between the two halves.
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include <atomic>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "gguf/gguf.h"
#include "kvserve.grpc.pb.h"
#include "model/decoder_model.h"
#include "model_runner.h"
#include "server_process.h"
#include "stats_when_idle.h"
#include "test_support.h"
#include "text/tokenizer.h"

namespace kvserve {
namespace {

using testing::shared_model;
namespace pb = kvserve::v1;

constexpr long kRssGrowthBoundKib = 64 * 1024;

TEST(SoakHttp, ThousandStreamsWithDisconnects) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  const std::vector<std::string> prompts = {"Once upon a time", "The dog", "Lily and Tom went to the park",
                                            "One day, a little bird", "Tim had a red ball. He"};
  const std::vector<int> lengths = {8, 24, 60, 120};
  std::map<std::pair<int, int>, std::string> solo;  // the text each (prompt, length) streams alone
  {
    GgufFile file(shared_model("stories260K.gguf"));
    DecoderModel model(file);
    Tokenizer tok(file);
    testing::ModelRunner runner(model, 8, 128);
    for (size_t p = 0; p < prompts.size(); ++p) {
      const std::vector<int32_t> prompt = tok.encode(prompts[p], true);
      const std::vector<int32_t> full = runner.greedy(prompt, lengths.back());
      for (int n : lengths) {
        IncrementalDecoder dec(tok, prompt);
        std::string text;
        for (int k = 0; k < n; ++k) text += dec.push(full[k]);
        solo[{static_cast<int>(p), n}] = text + dec.flush();
      }
    }
  }
  testing::ServerProcess server({"--model", shared_model("stories260K.gguf"), "--set", "cache.block_size=8", "--set",
                                 "cache.num_blocks=2048", "--set", "scheduler.max_model_len=512", "--set",
                                 "scheduler.max_waiting=4096", "--set", "server.log_level=\"warn\"", "--set",
                                 "server.http_listen=\"127.0.0.1:0\""});
  ASSERT_TRUE(server.started()) << server.log();
  int http_port = 0;
  for (int i = 0; i < 100 && !http_port; ++i) {
    std::ifstream in(server.port_file() + ".http");
    if (!(in >> http_port)) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(http_port, 0);

  struct Work {
    int prompt, max_new, cancel_after;  // cancel_after -1: not cancelled; 0: before any event
    bool stop;
  };
  // 256 connections at once (the server runs 64 sequences; the rest wait with their connections parked).
  const int n_requests = 1000, concurrency = 256;
  std::mt19937 rng(17);
  std::vector<Work> work(n_requests);
  for (Work& w : work) {
    w.prompt = static_cast<int>(rng() % prompts.size());
    w.max_new = lengths[rng() % lengths.size()];
    w.cancel_after = rng() % 5 == 0 ? static_cast<int>(rng() % 6) : -1;
    w.stop = w.cancel_after < 0 && rng() % 8 == 0;
  }
  std::atomic<int> next = 0, ok = 0, cancelled = 0, mismatched = 0, failed = 0;
  long rss_start = server.rss_kib(), rss_mid = 0;
  std::mutex mid_mu;
  auto worker = [&] {
    httplib::Client cli("127.0.0.1", http_port);
    cli.set_read_timeout(120, 0);
    for (int i; (i = next++) < n_requests;) {
      if (i == n_requests / 2) {
        std::lock_guard lock(mid_mu);
        rss_mid = server.rss_kib();
      }
      const Work& w = work[i];
      nlohmann::json body = {{"model", "stories260K"}, {"prompt", prompts[w.prompt]}, {"max_tokens", w.max_new},
                             {"temperature", 0}, {"ignore_eos", true}, {"stream", true}};
      if (w.stop) body["stop"] = " the";
      httplib::Request req;
      req.method = "POST";
      req.path = "/v1/completions";
      req.body = body.dump();
      req.set_header("Content-Type", "application/json");
      std::string buffer, text, finish;
      int events = 0;
      bool dropped = false, done = false;
      req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
        if (w.cancel_after == 0) return !(dropped = true);
        buffer.append(data, len);
        for (size_t end; (end = buffer.find("\n\n")) != std::string::npos; buffer.erase(0, end + 2)) {
          const std::string ev = buffer.substr(0, end);
          if (ev == "data: [DONE]") {
            done = true;
            continue;
          }
          const auto j = nlohmann::json::parse(ev.substr(6));
          text += j["choices"][0]["text"].get<std::string>();
          if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
          if (w.cancel_after > 0 && ++events == w.cancel_after) return !(dropped = true);
        }
        return true;
      };
      httplib::Response res;
      httplib::Error err;
      const bool sent = cli.send(req, res, err);
      if (dropped) {
        ++cancelled;
        continue;
      }
      if (!sent || res.status != 200 || !done) {
        ++failed;
        ADD_FAILURE() << "request " << i << ": " << httplib::to_string(err) << " status " << res.status;
        continue;
      }
      ++ok;
      const std::string& ref = solo[{w.prompt, w.max_new}];
      const std::string want = w.stop ? ref.substr(0, std::min(ref.find(" the"), ref.size())) : ref;
      if (text != want || (w.stop && ref.find(" the") != std::string::npos ? finish != "stop" : finish != "length"))
        ++mismatched;
    }
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < concurrency; ++c) threads.emplace_back(worker);
  for (auto& th : threads) th.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long rss_end = server.rss_kib();

  auto stub = pb::Inference::NewStub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  const pb::GetStatsResponse s = testing::stats_when_idle(*stub);
  std::printf("HTTP soak: %d streams in %.1f s: %d completed, %d cancelled by disconnecting, %d mismatched; RSS start "
              "%ld KiB, middle %ld KiB, end %ld KiB; blocks free %d of %d\n",
              n_requests, secs, ok.load(), cancelled.load(), mismatched.load(), rss_start, rss_mid, rss_end,
              s.blocks_free(), s.blocks_total());
  EXPECT_EQ(mismatched, 0);
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(ok + cancelled, n_requests);
  EXPECT_EQ(s.num_requests_running(), 0);
  EXPECT_EQ(s.num_requests_waiting(), 0);
  EXPECT_EQ(s.blocks_free(), s.blocks_total());
  EXPECT_LT(rss_end - rss_mid, kRssGrowthBoundKib);
}

}  // namespace
}  // namespace kvserve
