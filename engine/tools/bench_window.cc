// kvserve-bench-window: how many full-context requests of a sliding-window model run at once in
// a fixed KV budget, with windowed layers releasing their blocks (cache.release_windowed_blocks)
// and without, beside the factor GetModelInfo's figures predict for the same budget. A request
// counts as running at full context in an engine step that samples a token for it (its prompt
// done); the figure is the most such requests in one step, each request long enough that every
// one has its whole prompt in the cache then.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "model/synthetic.h"
#include "runtime/engine.h"

namespace {

using Clock = std::chrono::steady_clock;

// Every sampled token's time; a step's tokens are delivered together, steps apart by a forward pass.
class StepLog {
 public:
  void add(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back({Clock::now(), id});
  }
  // The most requests that got a token in one step: events closer than `gap` belong to one step.
  int peak(std::chrono::microseconds gap) {
    std::lock_guard<std::mutex> lock(mu_);
    std::sort(events_.begin(), events_.end());
    int best = 0, n = 0;
    for (size_t i = 0; i < events_.size(); ++i) {
      n = i > 0 && events_[i].first - events_[i - 1].first < gap ? n + 1 : 1;
      best = std::max(best, n);
    }
    return best;
  }

 private:
  std::mutex mu_;
  std::vector<std::pair<Clock::time_point, uint64_t>> events_;
};

class Sink : public kvserve::ResultSink {
 public:
  Sink(StepLog& log, uint64_t id, std::atomic<int>& done) : log_(log), id_(id), done_(done) {}
  void on_event(kvserve::Event ev) override {
    if (!ev.token_ids.empty()) log_.add(id_);
    if (ev.completion) ++done_;
  }

 private:
  StepLog& log_;
  uint64_t id_;
  std::atomic<int>& done_;
};

struct Run {
  kvserve::ModelInfo info;
  int peak = 0;
  int64_t preemptions = 0;
  double seconds = 0;
};

Run run(kvserve::EngineOptions o, int requests, int prompt, int gen) {
  kvserve::Engine engine(o);
  Run r;
  r.info = engine.model_info();
  StepLog log;
  std::atomic<int> done = 0;
  std::mt19937 rng(7);
  const auto start = Clock::now();
  for (int i = 0; i < requests; ++i) {
    kvserve::Request q;
    q.prompt.push_back(1);
    while (static_cast<int>(q.prompt.size()) < prompt) q.prompt.push_back(3 + static_cast<int32_t>(rng() % 500));
    q.sampling.temperature = 0.0f;
    q.sampling.max_new_tokens = gen;
    q.sampling.ignore_eos = true;
    const auto s = engine.submit(q, std::make_shared<Sink>(log, static_cast<uint64_t>(i), done));
    if (!s.ok()) throw std::runtime_error("submit refused: " + s.message);
  }
  while (done < requests) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  r.peak = log.peak(std::chrono::microseconds(300));
  r.preemptions = engine.stats().preemptions_total;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Full-context requests of a sliding-window model at once in a fixed KV budget, with and without "
               "windowed block release"};
  kvserve::SyntheticSpec spec;
  spec.arch = "gemma3";
  spec.dim = 64;
  spec.layers = 12;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.head_dim = 16;
  spec.ffn = 128;
  spec.window = 512;
  int context = 4096, gen = 128, requests = 24, max_seqs = 64;
  double budget_requests = 6.0;
  std::string dir = "build/models";
  app.add_option("--models-dir", dir, "where the synthetic model is written")->capture_default_str();
  app.add_option("--layers", spec.layers, "layers (every window-period-th global)")->capture_default_str();
  app.add_option("--window", spec.window, "the local layers' window")->capture_default_str();
  app.add_option("--window-period", spec.window_period, "period - 1 local layers, then one global")->capture_default_str();
  app.add_option("--context", context, "max_model_len, and each request's prompt + output")->capture_default_str();
  app.add_option("--gen", gen, "output tokens of each request")->capture_default_str();
  app.add_option("--requests", requests, "requests submitted at once")->capture_default_str();
  app.add_option("--budget-requests", budget_requests,
                 "the KV budget, in full-context requests of the cache that keeps every block")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spec.context = context;
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/bench-window-gemma3-l" + std::to_string(spec.layers) + "-w" +
                           std::to_string(spec.window) + ".gguf";
  kvserve::write_synthetic_model(spec, path);

  kvserve::EngineOptions o;
  o.model.path = path;
  o.scheduler.max_model_len = context;
  o.scheduler.max_num_seqs = max_seqs;
  o.scheduler.max_num_batched_tokens = 512;
  o.cache.enable_prefix_caching = false;
  o.cache.num_blocks = 1;
  o.cache.release_windowed_blocks = false;
  const kvserve::ModelInfo keep_probe = kvserve::Engine(o).model_info();
  o.cache.num_blocks = 0;
  o.cache.memory_bytes = static_cast<int64_t>(budget_requests * keep_probe.kv_bytes_per_request);

  const Run keep = run(o, requests, context - gen, gen);
  o.cache.release_windowed_blocks = true;
  const Run release = run(o, requests, context - gen, gen);
  const double predicted = static_cast<double>(keep.info.kv_bytes_per_request) / release.info.kv_bytes_per_request;
  std::printf("model: %d layers (%d windowed at %d positions, %d full), context %d, KV budget %.1f MiB\n",
              spec.layers, release.info.kv_windowed_layers, spec.window, release.info.kv_full_layers, context,
              o.cache.memory_bytes / 1048576.0);
  for (const auto& [name, r] : {std::pair<const char*, const Run&>{"keep every block", keep}, {"release windowed", release}})
    std::printf("%-17s: %8.2f MiB a request, cache holds %5.2f requests (max_concurrency), %2d ran at once, "
                "%lld preemptions, %.1f s\n",
                name, r.info.kv_bytes_per_request / 1048576.0, r.info.max_concurrency, r.peak,
                static_cast<long long>(r.preemptions), r.seconds);
  std::printf("concurrency: %.2fx measured (%d / %d), %.2fx predicted by the bytes a request holds\n",
              static_cast<double>(release.peak) / keep.peak, release.peak, keep.peak, predicted);
  return 0;
}
