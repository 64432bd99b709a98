// kvserve-bench: a serving benchmark over gRPC in the manner of vLLM's benchmark_serving.
// N requests with random distinct prompts, sent at a Poisson request rate or as fast as a
// concurrency cap allows; reports request and token throughput, time to first token, time per
// output token, inter-token latency and end-to-end latency (mean, p50, p90, p99).
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "bench_inspect_load.h"
#include "kvserve.grpc.pb.h"

#include <httplib.h>

namespace {

using Clock = std::chrono::steady_clock;
namespace pb = kvserve::v1;

struct Result {
  bool ok = false;
  bool cancelled = false;  // the client cancelled it on purpose (--cancel-fraction)
  std::string error;
  int prompt_tokens = 0;
  int output_tokens = 0;
  double ttft = 0, e2e = 0;
  std::vector<double> itl;  // gaps between chunk arrivals, per token
};

struct Stats {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};

Stats summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / v.size();
  auto pct = [&](double p) { return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))]; };
  s.p50 = pct(0.50);
  s.p90 = pct(0.90);
  s.p99 = pct(0.99);
  return s;
}

class Semaphore {
 public:
  explicit Semaphore(int n) : n_(n) {}
  void acquire() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [&] { return n_ > 0; });
    --n_;
  }
  void release() {
    {
      std::lock_guard<std::mutex> l(mu_);
      ++n_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
};

// cancel_after > 0: the client cancels the call once that many tokens have arrived, as a user
// closing a tab would; the server must free the sequence and go on with the rest.
Result run_request(pb::Inference::Stub& stub, const pb::GenerateRequest& req, int cancel_after) {
  Result r;
  r.prompt_tokens = req.prompt_token_ids_size();
  grpc::ClientContext ctx;
  const auto t0 = Clock::now();
  auto last = t0;
  auto reader = stub.Generate(&ctx, req);
  pb::GenerateResponse resp;
  while (reader->Read(&resp)) {
    if (!resp.has_chunk() || resp.chunk().token_ids_size() == 0) continue;
    const auto now = Clock::now();
    const int n = resp.chunk().token_ids_size();
    if (r.output_tokens == 0) {
      r.ttft = std::chrono::duration<double>(now - t0).count();
    } else {
      // A chunk carrying several tokens (coalesced behind a busy stream) spreads its gap.
      const double gap = std::chrono::duration<double>(now - last).count() / n;
      for (int i = 0; i < n; ++i) r.itl.push_back(gap);
    }
    r.output_tokens += n;
    last = now;
    if (cancel_after > 0 && r.output_tokens >= cancel_after && !r.cancelled) {
      r.cancelled = true;
      ctx.TryCancel();
    }
  }
  grpc::Status st = reader->Finish();
  r.e2e = std::chrono::duration<double>(Clock::now() - t0).count();
  if (r.cancelled && st.error_code() == grpc::StatusCode::CANCELLED) return r;
  r.cancelled = false;  // it finished before the cancel took hold: an ordinary result
  r.ok = st.ok();
  if (!st.ok()) r.error = st.error_message();
  return r;
}

// The same request over the OpenAI-compatible HTTP API (POST /v1/completions, streamed): one
// Server-Sent Event per engine event, each counted as a token arrival (the API sends text, not
// token counts), the final usage chunk giving the true output count. cancel_after > 0: the
// connection is dropped once that many chunks arrived, which cancels the request.
Result run_request_http(const std::string& host, int port, const std::string& model, const pb::GenerateRequest& req,
                        int cancel_after) {
  Result r;
  r.prompt_tokens = req.prompt_token_ids_size();
  nlohmann::json body = {{"model", model},
                         {"prompt", std::vector<int32_t>(req.prompt_token_ids().begin(), req.prompt_token_ids().end())},
                         {"max_tokens", req.sampling().max_new_tokens()},
                         {"temperature", 0},
                         {"ignore_eos", true},
                         {"stream", true},
                         {"stream_options", {{"include_usage", true}}}};
  httplib::Client cli(host, port);
  cli.set_read_timeout(600, 0);
  httplib::Request hreq;
  hreq.method = "POST";
  hreq.path = "/v1/completions";
  hreq.body = body.dump();
  hreq.set_header("Content-Type", "application/json");
  const auto t0 = Clock::now();
  auto last = t0;
  std::string buffer;
  int chunks = 0, usage_tokens = -1;
  bool done = false;
  hreq.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buffer.append(data, len);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos; buffer.erase(0, end + 2)) {
      const std::string event = buffer.substr(0, end);
      if (event.rfind("data: ", 0) != 0) continue;
      if (event == "data: [DONE]") {
        done = true;
        continue;
      }
      const nlohmann::json j = nlohmann::json::parse(event.substr(6), nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("usage") && j["usage"].is_object()) usage_tokens = j["usage"].value("completion_tokens", 0);
      if (!j.contains("choices") || j["choices"].empty() || j["choices"][0].value("text", "").empty()) continue;
      const auto now = Clock::now();
      if (chunks == 0)
        r.ttft = std::chrono::duration<double>(now - t0).count();
      else
        r.itl.push_back(std::chrono::duration<double>(now - last).count());
      last = now;
      ++chunks;
      if (cancel_after > 0 && chunks >= cancel_after) {
        r.cancelled = true;
        return false;  // drop the connection: the server cancels the request
      }
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool sent = cli.send(hreq, res, err);
  r.e2e = std::chrono::duration<double>(Clock::now() - t0).count();
  if (r.cancelled) return r;
  r.ok = sent && res.status == 200 && done;
  r.output_tokens = usage_tokens >= 0 ? usage_tokens : chunks;
  if (!r.ok) r.error = sent ? "HTTP " + std::to_string(res.status) + " " + res.body : httplib::to_string(err);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvserve-bench: serving benchmark over gRPC (or the HTTP API with --http)"};
  std::string addr = "127.0.0.1:50051", json_out;
  int shared_prefix = 0;
  int num_requests = 64, concurrency = 16, prompt_len = 128, prompt_range = 0, output_len = 128, output_range = 0;
  double rate = 0, cancel_fraction = 0;
  uint32_t seed = 0;
  bool quiet = false;
  kvserve::InspectLoadOptions inspect;
  int inspect_load = 0;
  std::string http;
  app.add_option("--addr", addr)->capture_default_str();
  app.add_option("--http", http, "HOST:PORT: drive the OpenAI-compatible HTTP API instead (model info still over gRPC)");
  app.add_option("--num-requests", num_requests)->capture_default_str();
  app.add_option("--concurrency", concurrency, "requests in flight at most (0 = no cap)")->capture_default_str();
  app.add_option("--request-rate", rate, "Poisson arrivals per second (0 = all at once)")->capture_default_str();
  app.add_option("--prompt-len", prompt_len, "mean prompt tokens")->capture_default_str();
  app.add_option("--prompt-len-range", prompt_range, "prompt tokens vary uniformly by +/- this")->capture_default_str();
  app.add_option("--output-len", output_len, "mean output tokens")->capture_default_str();
  app.add_option("--output-len-range", output_range, "output tokens vary uniformly by +/- this")->capture_default_str();
  app.add_option("--shared-prefix-len", shared_prefix, "tokens every prompt starts with (before its own prompt-len)")
      ->capture_default_str();
  app.add_option("--cancel-fraction", cancel_fraction,
                 "this share of requests is cancelled by the client part-way through its output")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", seed)->capture_default_str();
  app.add_option("--json", json_out, "write the results as JSON here");
  app.add_flag("--quiet", quiet, "no progress bar");
  app.add_option("--inspect-load", inspect_load,
                 "instead: time to first token of a short Generate alone and beside this many HeadImportance calls");
  app.add_option("--inspect-tokens", inspect.inspect_tokens, "prompt tokens of each HeadImportance call")
      ->capture_default_str();
  app.add_option("--probes", inspect.probes, "probe Generates per phase (--inspect-load)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  auto stub = pb::Inference::NewStub(channel);
  pb::GetModelInfoResponse info;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::Status st = stub->GetModelInfo(&ctx, {}, &info);
    if (!st.ok()) {
      std::fprintf(stderr, "kvserve-bench: cannot reach %s: %s\n", addr.c_str(), st.error_message().c_str());
      return 1;
    }
  }
  if (inspect_load > 0) {
    inspect.calls = inspect_load;
    inspect.seed = seed;
    return kvserve::run_inspect_load(*stub, info, inspect, json_out);
  }
  std::string http_host, http_model;
  int http_port = 0;
  if (!http.empty()) {
    http_host = http.substr(0, http.rfind(':'));
    http_port = std::stoi(http.substr(http.rfind(':') + 1));
    httplib::Client cli(http_host, http_port);
    auto res = cli.Get("/v1/models");
    if (!res || res->status != 200) {
      std::fprintf(stderr, "kvserve-bench: no HTTP API at %s\n", http.c_str());
      return 1;
    }
    http_model = nlohmann::json::parse(res->body)["data"][0]["id"].get<std::string>();
  }
  std::mt19937 rng(seed);
  std::vector<pb::GenerateRequest> reqs(num_requests);
  std::vector<double> arrivals(num_requests, 0.0);
  std::vector<int> cancel_after(num_requests, 0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::exponential_distribution<double> gap(rate > 0 ? rate : 1.0);
  double t = 0;
  std::vector<int32_t> prefix;
  for (int k = 0; k < shared_prefix; ++k) prefix.push_back(3 + static_cast<int32_t>(rng() % (info.vocab_size() - 3)));
  for (int i = 0; i < num_requests; ++i) {
    const int pl = std::max(1, prompt_len + (prompt_range ? static_cast<int>(rng() % (2 * prompt_range + 1)) - prompt_range : 0));
    const int ol = std::max(1, output_len + (output_range ? static_cast<int>(rng() % (2 * output_range + 1)) - output_range : 0));
    auto& r = reqs[i];
    r.add_prompt_token_ids(1);
    for (int32_t id : prefix) r.add_prompt_token_ids(id);
    for (int k = 1; k < pl; ++k) r.add_prompt_token_ids(3 + static_cast<int32_t>(rng() % (info.vocab_size() - 3)));
    r.mutable_sampling()->set_max_new_tokens(ol);
    r.mutable_sampling()->set_temperature(0);
    r.mutable_sampling()->set_ignore_eos(true);
    if (rate > 0) t += gap(rng);
    arrivals[i] = t;
    if (cancel_fraction > 0 && unit(rng) < cancel_fraction) cancel_after[i] = 1 + static_cast<int>(rng() % ol);
  }

  std::vector<Result> results(num_requests);
  std::atomic<int> finished = 0;
  Semaphore slots(concurrency > 0 ? concurrency : num_requests);
  // The engine's busy time around the run (GetStats): the share of wall time it spent stepping.
  auto engine_seconds = [&](double* forward) {
    pb::GetStatsResponse st;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!stub->GetStats(&ctx, {}, &st).ok()) return -1.0;
    *forward = st.engine_forward_seconds_total();
    return st.engine_busy_seconds_total();
  };
  double forward_before = 0;
  const double busy_before = engine_seconds(&forward_before);
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  std::thread progress([&] {
    while (!quiet && finished < num_requests) {
      const int f = finished;
      const int w = 40, filled = w * f / num_requests;
      std::fprintf(stderr, "\r[%s%s] %d/%d", std::string(filled, '#').c_str(), std::string(w - filled, ' ').c_str(), f,
                   num_requests);
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    if (!quiet) std::fprintf(stderr, "\r[%s] %d/%d\n", std::string(40, '#').c_str(), num_requests, num_requests);
  });
  for (int i = 0; i < num_requests; ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i])));
    slots.acquire();
    threads.emplace_back([&, i] {
      results[i] = http.empty() ? run_request(*stub, reqs[i], cancel_after[i])
                                : run_request_http(http_host, http_port, http_model, reqs[i], cancel_after[i]);
      slots.release();
      ++finished;
    });
  }
  for (auto& th : threads) th.join();
  progress.join();
  const double duration = std::chrono::duration<double>(Clock::now() - start).count();
  double forward_after = 0;
  const double busy_after = engine_seconds(&forward_after);
  const bool engine_known = busy_before >= 0 && busy_after >= 0;
  const double busy_share = engine_known ? (busy_after - busy_before) / duration : 0.0;
  const double forward_share = engine_known ? (forward_after - forward_before) / duration : 0.0;

  int ok = 0, cancelled = 0;
  int64_t in_tokens = 0, out_tokens = 0;
  std::vector<double> ttft, tpot, itl, e2e;
  for (const auto& r : results) {
    if (r.cancelled) {  // not a failure, and not part of the latency figures
      ++cancelled;
      continue;
    }
    if (!r.ok) {
      std::fprintf(stderr, "request failed: %s\n", r.error.c_str());
      continue;
    }
    ++ok;
    in_tokens += r.prompt_tokens;
    out_tokens += r.output_tokens;
    ttft.push_back(r.ttft);
    e2e.push_back(r.e2e);
    if (r.output_tokens > 1) tpot.push_back((r.e2e - r.ttft) / (r.output_tokens - 1));
    itl.insert(itl.end(), r.itl.begin(), r.itl.end());
  }
  const Stats s_ttft = summarize(ttft), s_tpot = summarize(tpot), s_itl = summarize(itl), s_e2e = summarize(e2e);
  std::printf("api: %s\n", http.empty() ? "gRPC" : "HTTP (OpenAI completions, streamed)");
  std::printf("requests: %d ok of %d (%d cancelled by the client), concurrency %d, rate %s, duration %.2f s\n", ok,
              num_requests, cancelled, concurrency, rate > 0 ? std::to_string(rate).c_str() : "inf", duration);
  std::printf("throughput: %.2f req/s, output %.1f tok/s, total %.1f tok/s\n", ok / duration, out_tokens / duration,
              (in_tokens + out_tokens) / duration);
  auto line = [](const char* name, const Stats& s) {
    std::printf("%-28s mean %8.1f  p50 %8.1f  p90 %8.1f  p99 %8.1f\n", name, s.mean * 1e3, s.p50 * 1e3, s.p90 * 1e3,
                s.p99 * 1e3);
  };
  line("time to first token (ms)", s_ttft);
  line("time per output token (ms)", s_tpot);
  line("inter-token latency (ms)", s_itl);
  line("end-to-end latency (ms)", s_e2e);
  if (engine_known)
    std::printf("engine: in steps %.1f%% of the run's wall time, in forward passes %.1f%%\n", 100 * busy_share,
                100 * forward_share);
  if (!json_out.empty()) {
    nlohmann::json j;
    j["api"] = http.empty() ? "grpc" : "http";
    j["requests"] = num_requests;
    j["completed"] = ok;
    j["cancelled"] = cancelled;
    j["concurrency"] = concurrency;
    j["request_rate"] = rate;
    j["prompt_len"] = prompt_len;
    j["shared_prefix_len"] = shared_prefix;
    j["output_len"] = output_len;
    j["duration_s"] = duration;
    j["request_throughput"] = ok / duration;
    j["output_throughput"] = out_tokens / duration;
    j["total_token_throughput"] = (in_tokens + out_tokens) / duration;
    if (engine_known) {
      j["engine_busy_share"] = busy_share;        // seconds in steps / wall seconds of the run
      j["engine_forward_share"] = forward_share;  // seconds in forward passes / wall seconds
    }
    for (auto [name, st] : {std::pair{"ttft", s_ttft}, {"tpot", s_tpot}, {"itl", s_itl}, {"e2e", s_e2e}})
      j[name] = {{"mean_ms", st.mean * 1e3}, {"p50_ms", st.p50 * 1e3}, {"p90_ms", st.p90 * 1e3}, {"p99_ms", st.p99 * 1e3}};
    std::ofstream(json_out) << j.dump(2) << "\n";
  }
  return ok + cancelled == num_requests ? 0 : 1;
}
