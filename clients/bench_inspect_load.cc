#include "bench_inspect_load.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

namespace kvserve {
namespace {

using Clock = std::chrono::steady_clock;

struct Summary {
  double mean = 0, p50 = 0, p90 = 0;
};

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  for (double x : v) s.mean += x / v.size();
  s.p50 = v[v.size() / 2];
  s.p90 = v[std::min(v.size() - 1, v.size() * 9 / 10)];
  return s;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int n, int vocab) {
  std::vector<int32_t> ids{1};
  for (int i = 1; i < n; ++i) ids.push_back(3 + static_cast<int32_t>(rng() % (vocab - 3)));
  return ids;
}

// Time to first token of one probe, in seconds; negative when it failed.
double probe(v1::Inference::Stub& stub, const std::vector<int32_t>& prompt, int output) {
  v1::GenerateRequest req;
  for (int32_t id : prompt) req.add_prompt_token_ids(id);
  req.mutable_sampling()->set_temperature(0);
  req.mutable_sampling()->set_max_new_tokens(output);
  req.mutable_sampling()->set_ignore_eos(true);
  grpc::ClientContext ctx;
  const auto t0 = Clock::now();
  double ttft = -1;
  auto reader = stub.Generate(&ctx, req);
  v1::GenerateResponse resp;
  while (reader->Read(&resp))
    if (ttft < 0 && resp.has_chunk() && resp.chunk().token_ids_size() > 0)
      ttft = std::chrono::duration<double>(Clock::now() - t0).count();
  return reader->Finish().ok() ? ttft : -1;
}

std::vector<double> probe_phase(v1::Inference::Stub& stub, const InspectLoadOptions& o, int vocab, std::mt19937& rng,
                                int* failures) {
  std::vector<double> out;
  for (int i = 0; i < o.probes; ++i) {
    // A random pause, so probes arrive at every phase of the steps already running.
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 20000));
    const double t = probe(stub, random_prompt(rng, o.probe_prompt, vocab), o.probe_output);
    if (t < 0) ++*failures;
    else out.push_back(t);
  }
  return out;
}

}  // namespace

int run_inspect_load(v1::Inference::Stub& stub, const v1::GetModelInfoResponse& info, const InspectLoadOptions& o,
                     const std::string& json_out) {
  std::mt19937 rng(o.seed);
  const int vocab = info.vocab_size();
  int failures = 0;
  probe_phase(stub, {.probes = 5, .probe_prompt = o.probe_prompt, .probe_output = o.probe_output}, vocab, rng, &failures);
  const std::vector<double> alone = probe_phase(stub, o, vocab, rng, &failures);
  // One call on an idle server: what the cap on background work costs inspection itself.
  double call_alone = -1;
  {
    v1::HeadImportanceRequest req;
    for (int32_t id : random_prompt(rng, o.inspect_tokens, vocab)) req.add_prompt_token_ids(id);
    grpc::ClientContext ctx;
    v1::HeadImportanceResponse resp;
    const auto t0 = Clock::now();
    if (stub.HeadImportance(&ctx, req, &resp).ok()) call_alone = std::chrono::duration<double>(Clock::now() - t0).count();
  }

  std::atomic<bool> stop = false;
  std::atomic<int> completed = 0, refused = 0;
  std::mutex mu;
  std::vector<grpc::ClientContext*> live;
  std::vector<double> call_seconds;
  std::vector<std::thread> callers;
  for (int c = 0; c < o.calls; ++c) {
    callers.emplace_back([&, c] {
      std::mt19937 local(o.seed + 1 + c);
      while (!stop) {
        v1::HeadImportanceRequest req;
        for (int32_t id : random_prompt(local, o.inspect_tokens, vocab)) req.add_prompt_token_ids(id);
        grpc::ClientContext ctx;
        {
          std::lock_guard<std::mutex> lock(mu);
          if (stop) break;
          live.push_back(&ctx);
        }
        v1::HeadImportanceResponse resp;
        const auto t0 = Clock::now();
        const grpc::Status st = stub.HeadImportance(&ctx, req, &resp);
        {
          std::lock_guard<std::mutex> lock(mu);
          live.erase(std::find(live.begin(), live.end(), &ctx));
          if (st.ok()) call_seconds.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        }
        if (st.ok()) ++completed;
        else if (!stop) ++refused;
      }
    });
  }
  // Wait until the inspection work is in the engine before probing.
  for (int i = 0; i < 500; ++i) {
    grpc::ClientContext ctx;
    v1::GetStatsResponse s;
    if (stub.GetStats(&ctx, {}, &s).ok() && s.num_requests_running() + s.num_requests_waiting_background() > 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const std::vector<double> loaded = probe_phase(stub, o, vocab, rng, &failures);
  {
    std::lock_guard<std::mutex> lock(mu);
    stop = true;
    for (grpc::ClientContext* ctx : live) ctx->TryCancel();
  }
  for (auto& t : callers) t.join();

  const Summary a = summarize(alone), l = summarize(loaded);
  const Summary calls = summarize(call_seconds);
  std::printf("probe: %d prompt tokens, %d output tokens, %d per phase; load: %d HeadImportance calls of %d tokens\n",
              o.probe_prompt, o.probe_output, o.probes, o.calls, o.inspect_tokens);
  std::printf("%-32s mean %8.1f  p50 %8.1f  p90 %8.1f\n", "TTFT alone (ms)", a.mean * 1e3, a.p50 * 1e3, a.p90 * 1e3);
  std::printf("%-32s mean %8.1f  p50 %8.1f  p90 %8.1f\n", "TTFT beside inspection (ms)", l.mean * 1e3, l.p50 * 1e3,
              l.p90 * 1e3);
  std::printf("ratio (loaded / alone): mean %.2f, p50 %.2f, p90 %.2f\n", l.mean / a.mean, l.p50 / a.p50, l.p90 / a.p90);
  std::printf("HeadImportance alone: %.2f s; beside the probes: %d completed (mean %.2f s), %d refused; %d probes failed\n",
              call_alone, completed.load(), calls.mean, refused.load(), failures);
  if (!json_out.empty()) {
    nlohmann::json j;
    j["calls"] = o.calls;
    j["inspect_tokens"] = o.inspect_tokens;
    j["probes"] = o.probes;
    for (auto [name, s] : {std::pair{"ttft_alone", a}, {"ttft_loaded", l}})
      j[name] = {{"mean_ms", s.mean * 1e3}, {"p50_ms", s.p50 * 1e3}, {"p90_ms", s.p90 * 1e3}};
    j["ratio_mean"] = l.mean / a.mean;
    j["ratio_p50"] = l.p50 / a.p50;
    j["inspect_call_alone_s"] = call_alone;
    j["inspect_calls_completed"] = completed.load();
    j["inspect_call_mean_s"] = calls.mean;
    j["inspect_calls_refused"] = refused.load();
    j["probe_failures"] = failures;
    std::ofstream(json_out) << j.dump(2) << "\n";
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace kvserve
