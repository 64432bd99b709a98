// Load and faults against the real server binary (ctest label "soak"): 1,000 requests of mixed
// lengths at concurrency 64, a fifth cancelled by the client at random points, some with short
// deadlines, some with stop strings. Every request that was not cancelled completes, greedy ones
// with exactly their solo output; afterwards nothing is running or waiting, every KV block is
// free (or cached), and resident memory did not grow between the two halves. Repeated with a
// cache small enough to force preemption. Plus an overload burst against a tiny waiting queue.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <map>
#include <mutex>
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

using grpc::StatusCode;
using testing::shared_model;
namespace pb = kvserve::v1;

constexpr long kRssGrowthBoundKib = 64 * 1024;  // second half may not grow RSS by more than 64 MiB

struct Kind {
  enum { kGreedy, kCancel, kDeadline, kStop } type;
  int prompt = 0;  // index into the prompt set
  int max_new = 0;
  int cancel_after = 0;
  int deadline_ms = 0;
};

struct Totals {
  std::atomic<int> ok = 0, cancelled = 0, deadline = 0, refused = 0, mismatched = 0, unexpected = 0;
};

void soak(const std::vector<std::string>& extra_args, bool expect_preemption) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  const std::vector<std::string> prompts = {"Once upon a time", "The dog", "Lily and Tom went to the park",
                                            "One day, a little bird", "Tim had a red ball. He",
                                            "The sun was hot and the", "Sue wanted to play with"};
  const std::vector<int> lengths = {8, 24, 60, 120};
  // Solo greedy references for every (prompt, length).
  std::map<std::pair<int, int>, std::vector<int32_t>> solo;
  {
    GgufFile file(shared_model("stories260K.gguf"));
    DecoderModel model(file);
    Tokenizer tok(file);
    testing::ModelRunner runner(model, 8, 128);
    for (size_t p = 0; p < prompts.size(); ++p) {
      auto full = runner.greedy(tok.encode(prompts[p], true), lengths.back());
      for (int n : lengths) solo[{static_cast<int>(p), n}] = std::vector<int32_t>(full.begin(), full.begin() + n);
    }
  }
  std::vector<std::string> args = {"--model", shared_model("stories260K.gguf"), "--set", "cache.block_size=8",
                                   "--set", "scheduler.max_model_len=512", "--set", "scheduler.max_waiting=4096",
                                   "--set", "server.log_level=\"warn\""};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  testing::ServerProcess server(args);
  ASSERT_TRUE(server.started()) << server.log();
  auto channel = grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials());
  auto stub = pb::Inference::NewStub(channel);

  const int n_requests = 1000, concurrency = 64;
  std::mt19937 rng(2024);
  std::vector<Kind> work(n_requests);
  for (auto& k : work) {
    const unsigned r = rng() % 100;
    k.type = r < 20 ? Kind::kCancel : r < 30 ? Kind::kDeadline : r < 40 ? Kind::kStop : Kind::kGreedy;
    k.prompt = static_cast<int>(rng() % prompts.size());
    k.max_new = lengths[rng() % lengths.size()];
    k.cancel_after = static_cast<int>(rng() % 6);
    k.deadline_ms = 5 + static_cast<int>(rng() % 60);
  }
  Totals t;
  std::atomic<int> next = 0;
  long rss_start = server.rss_kib(), rss_mid = 0;
  std::mutex mid_mu;
  const auto start = std::chrono::steady_clock::now();
  auto worker = [&] {
    for (int i; (i = next++) < n_requests;) {
      if (i == n_requests / 2) {
        std::lock_guard<std::mutex> l(mid_mu);
        rss_mid = server.rss_kib();
      }
      const Kind& k = work[i];
      pb::GenerateRequest req;
      req.set_prompt(prompts[k.prompt]);
      req.mutable_sampling()->set_temperature(0);
      req.mutable_sampling()->set_max_new_tokens(k.max_new);
      req.mutable_sampling()->set_ignore_eos(true);
      if (k.type == Kind::kStop) req.mutable_sampling()->add_stop(" the");
      grpc::ClientContext ctx;
      if (k.type == Kind::kDeadline)
        ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(k.deadline_ms));
      if (k.type == Kind::kCancel && k.cancel_after == 0) ctx.TryCancel();
      auto reader = stub->Generate(&ctx, req);
      pb::GenerateResponse resp;
      std::vector<int32_t> tokens;
      std::string text;
      int chunks = 0;
      while (reader->Read(&resp)) {
        if (!resp.has_chunk()) continue;
        tokens.insert(tokens.end(), resp.chunk().token_ids().begin(), resp.chunk().token_ids().end());
        text += resp.chunk().text();
        if (k.type == Kind::kCancel && ++chunks == k.cancel_after) ctx.TryCancel();
      }
      grpc::Status st = reader->Finish();
      if (st.error_code() == StatusCode::CANCELLED && k.type == Kind::kCancel) {
        ++t.cancelled;
      } else if (st.error_code() == StatusCode::DEADLINE_EXCEEDED && k.type == Kind::kDeadline) {
        ++t.deadline;
      } else if (st.error_code() == StatusCode::RESOURCE_EXHAUSTED) {
        ++t.refused;
      } else if (st.ok()) {
        ++t.ok;
        const auto& ref = solo[{k.prompt, k.max_new}];
        if (k.type == Kind::kStop) {
          // Tokens up to the stop match the solo run; the text never shows the stop string.
          if (text.find(" the") != std::string::npos ||
              !std::equal(tokens.begin(), tokens.end(), ref.begin(), ref.begin() + std::min(tokens.size(), ref.size())))
            ++t.mismatched;
        } else if (tokens != ref) {
          ++t.mismatched;
        }
      } else {
        ++t.unexpected;
        ADD_FAILURE() << "request " << i << ": " << st.error_code() << " " << st.error_message();
      }
    }
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < concurrency; ++c) threads.emplace_back(worker);
  for (auto& th : threads) th.join();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const long rss_end = server.rss_kib();

  const pb::GetStatsResponse s = testing::stats_when_idle(*stub);
  std::printf("soak: %d requests in %.1f s: %d completed, %d cancelled, %d deadline, %d refused, %d mismatched; "
              "RSS start %ld KiB, middle %ld KiB, end %ld KiB; blocks free %d of %d (%d cached); "
              "preemptions %lld; prefix hit rate %.2f\n",
              n_requests, secs, t.ok.load(), t.cancelled.load(), t.deadline.load(), t.refused.load(),
              t.mismatched.load(), rss_start, rss_mid, rss_end, s.blocks_free(), s.blocks_total(), s.cached_blocks(),
              static_cast<long long>(s.num_preemptions_total()), s.prefix_cache_hit_rate());
  EXPECT_EQ(t.mismatched, 0);
  EXPECT_EQ(t.unexpected, 0);
  EXPECT_EQ(t.refused, 0);
  EXPECT_EQ(t.ok + t.cancelled + t.deadline, n_requests);
  EXPECT_GE(t.ok, n_requests / 2);
  EXPECT_EQ(s.num_requests_running(), 0);
  EXPECT_EQ(s.num_requests_waiting(), 0);
  EXPECT_EQ(s.blocks_free(), s.blocks_total());
  EXPECT_LT(rss_end - rss_mid, kRssGrowthBoundKib);
  if (expect_preemption) {
    EXPECT_GT(s.num_preemptions_total(), 0);
  }
}

TEST(Soak, ThousandRequestsMixedFaults) { soak({"--set", "cache.num_blocks=2048"}, false); }

TEST(Soak, ThousandRequestsWithPreemption) {
  // 48 blocks of 8 tokens: a few long requests fill it, 64 concurrent ones far overflow it.
  soak({"--set", "cache.num_blocks=48"}, true);
}

TEST(Soak, OverloadBurstGetsResourceExhaustedAndAcceptedOnesComplete) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("stories260K.gguf"));
  testing::ServerProcess server({"--model", shared_model("stories260K.gguf"), "--set", "cache.num_blocks=256",
                                 "--set", "scheduler.max_num_seqs=2", "--set", "scheduler.max_waiting=4", "--set",
                                 "server.log_level=\"warn\""});
  ASSERT_TRUE(server.started()) << server.log();
  auto stub = pb::Inference::NewStub(grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  std::atomic<int> ok = 0, exhausted = 0, other = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 48; ++i)
    threads.emplace_back([&] {
      pb::GenerateRequest req;
      req.set_prompt("Once upon a time");
      req.mutable_sampling()->set_max_new_tokens(200);
      req.mutable_sampling()->set_ignore_eos(true);
      grpc::ClientContext ctx;
      auto reader = stub->Generate(&ctx, req);
      pb::GenerateResponse resp;
      int tokens = 0;
      while (reader->Read(&resp)) {
        if (resp.has_chunk()) tokens += resp.chunk().token_ids_size();
      }
      grpc::Status st = reader->Finish();
      if (st.ok() && tokens == 200)
        ++ok;
      else if (st.error_code() == StatusCode::RESOURCE_EXHAUSTED && st.error_message().find("overloaded") != std::string::npos)
        ++exhausted;
      else
        ++other;
    });
  for (auto& th : threads) th.join();
  std::printf("overload: %d completed, %d refused (RESOURCE_EXHAUSTED), %d other\n", ok.load(), exhausted.load(),
              other.load());
  EXPECT_GT(exhausted, 0);
  EXPECT_GE(ok, 2);
  EXPECT_EQ(other, 0);
  EXPECT_EQ(ok + exhausted, 48);
}

}  // namespace
}  // namespace kvserve
