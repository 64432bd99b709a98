// kvserve-bench-speculative: what speculative decoding costs and gains for one stream.
//  1. (--part cost) Verification cost: the time of one sequence's forward pass over 1+K rows (its next token
//     and K proposed ones) at a context of --context tokens, against one row, K = 1..8, runs
//     interleaved; from it, the tokens per pass needed to break even and the speedup at a given
//     acceptance rate (each proposed token accepted with probability a, independently:
//     (1 - a^(K+1)) / (1 - a) tokens per pass).
//  2. (--part stream) End to end through the engine: one stream (or --streams concurrent ones), greedy,
//     speculative.method "off" against --method ("ngram", or "draft" with --draft's file), runs
//     alternating, on --prompt-file's text (or the model's own continuation of a short prompt):
//     output tokens per second (all streams together), the ratio, and the acceptance rate. With
//     one stream the accepted tokens are also counted from the stream (tokens minus steps), and a
//     count that differs from the engine's counter fails the run.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "gguf/gguf.h"
#include "kv_cache/block_allocator.h"
#include "kv_cache/block_table.h"
#include "kv_cache/kv_storage.h"
#include "model/decoder_model.h"
#include "runtime/engine.h"
#include "runtime/queue_sink.h"

namespace {

using Clock = std::chrono::steady_clock;
using kvserve::BatchInputs;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Part 1: seconds per forward pass of 1+K rows for each K in ks (index 0 is K = 0).
std::vector<double> verification_cost(const std::string& path, int context, const std::vector<int>& ks, int reps) {
  kvserve::GgufFile file(path);
  kvserve::DecoderModel model(file);
  const int32_t V = model.hparams().n_vocab, block = 16;
  const int max_k = *std::max_element(ks.begin(), ks.end());
  const int32_t blocks = (context + max_k + 1 + block - 1) / block + 1;
  kvserve::KvStorage kv(model.kv_shape(), block, blocks);
  kvserve::BlockAllocator alloc(blocks);
  kvserve::BlockTable table(block);
  table.grow_to(context + max_k + 1, alloc);
  std::mt19937 rng(1);
  auto batch = [&](int64_t first, int64_t n, bool all_rows) {
    BatchInputs in;
    in.max_blocks = static_cast<int32_t>(table.blocks().size());
    in.block_tables = table.blocks();
    for (int64_t p = first; p < first + n; ++p) {
      in.tokens.push_back(static_cast<int32_t>(3 + rng() % (V - 3)));
      in.positions.push_back(static_cast<int32_t>(p));
      in.token_seq.push_back(0);
      in.slots.push_back(table.slot(p));
      if (all_rows || p == first + n - 1) in.logit_rows.push_back(static_cast<int32_t>(p - first));
    }
    return in;
  };
  for (int64_t p = 0; p < context; p += 256) model.forward(batch(p, std::min<int64_t>(256, context - p), false), kv);
  std::vector<std::vector<double>> times(ks.size());
  for (int r = 0; r < reps + 2; ++r)
    for (size_t i = 0; i < ks.size(); ++i) {
      const BatchInputs in = batch(context, 1 + ks[i], true);  // the same positions each time: rewritten
      const auto t0 = Clock::now();
      model.forward(in, kv);
      if (r >= 2) times[i].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  std::vector<double> out;
  for (auto& t : times) out.push_back(median(t));
  return out;
}

struct Run {
  double tokens_per_s = 0;
  int64_t proposed = 0, accepted = 0;
  int64_t tokens = 0, steps = 0;  // streamed tokens, engine steps
};

// Part 2: `streams` greedy streams of n tokens after `prompt` at once, `requests` times, on a
// fresh engine; tokens per second over all streams.
Run end_to_end(const std::string& path, const std::string& method, const std::string& draft,
               const std::vector<int32_t>& prompt, int n, int requests, int streams, int threads, int num_tokens,
               const std::string& kv_dtype) {
  kvserve::EngineOptions o;
  o.cache.dtype = kv_dtype;
  o.model.path = path;
  o.model.num_threads = threads;
  o.cache.memory_bytes = int64_t{1} << 30;
  o.scheduler.max_num_seqs = std::max(o.scheduler.max_num_seqs, streams);
  o.speculative.method = method;
  o.speculative.num_tokens = num_tokens;
  if (method == "draft") o.speculative.draft_model = draft;
  kvserve::Engine engine(o);
  Run run;
  double seconds = 0;
  int64_t tokens = 0;
  for (int r = 0; r < requests; ++r) {
    std::vector<std::shared_ptr<kvserve::QueueSink>> sinks;
    const auto t0 = Clock::now();
    for (int i = 0; i < streams; ++i) {
      kvserve::Request req;
      req.prompt = prompt;
      req.sampling.temperature = 0;
      req.sampling.max_new_tokens = n;
      req.sampling.ignore_eos = true;
      req.cache_salt = std::to_string(r * streams + i);  // no prefix-cache reuse between the streams
      sinks.push_back(std::make_shared<kvserve::QueueSink>());
      if (!engine.submit(req, sinks.back()).ok()) throw std::runtime_error("request refused");
    }
    for (auto& sink : sinks) {
      for (;;) {
        auto ev = sink->pop(std::chrono::milliseconds(600000));
        if (!ev) throw std::runtime_error("no event");
        tokens += static_cast<int64_t>(ev->token_ids.size());
        if (ev->completion) break;
      }
    }
    seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  engine.shutdown(kvserve::Engine::Shutdown::kDrain);
  const kvserve::EngineStats s = engine.stats();
  run.tokens_per_s = tokens / seconds;
  run.proposed = s.spec_draft_tokens_total;
  run.accepted = s.spec_accepted_tokens_total;
  run.tokens = tokens;
  run.steps = s.steps_total;
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvserve-bench-speculative: speculative decoding's verification cost and one-stream speed"};
  std::string model, prompt_file, prompt_text = "Once upon a time";
  int context = 512, reps = 30, tokens = 256, requests = 3, rounds = 2, threads = 0, num_tokens = 4;
  std::string kv_dtype = "f32";
  app.add_option("--model", model, "GGUF file")->required();
  app.add_option("--context", context, "tokens in the cache when the verification pass runs");
  app.add_option("--reps", reps, "timed passes per K");
  app.add_option("--prompt-file", prompt_file, "text the stream starts from (else --prompt)");
  app.add_option("--prompt", prompt_text, "a short prompt");
  app.add_option("--tokens", tokens, "output tokens per request");
  app.add_option("--requests", requests, "requests per engine run");
  app.add_option("--rounds", rounds, "alternating off/ngram rounds");
  app.add_option("--threads", threads, "compute threads (0 = the CPUs this process may use)");
  app.add_option("--num-tokens", num_tokens, "speculative.num_tokens (K at most)");
  app.add_option("--kv-dtype", kv_dtype, "cache.dtype of the stream runs (f32, f16 or q8_0)")->capture_default_str();
  std::string method = "ngram", draft;
  int streams = 1;
  app.add_option("--method", method, "the proposer timed against off")->check(CLI::IsMember({"ngram", "draft"}));
  app.add_option("--draft", draft, "--method draft: the draft model's GGUF file");
  app.add_option("--streams", streams, "concurrent streams (1: one stream)");
  std::string part = "cost";
  app.add_option("--part", part, "cost (1) or stream (2): one per process, so that only one thread runs OpenMP work")
      ->check(CLI::IsMember({"cost", "stream"}));
  CLI11_PARSE(app, argc, argv);
  try {
    if (part == "cost") {
    const std::vector<int> ks = {0, 1, 2, 3, 4, 6, 8};
    const std::vector<double> cost = verification_cost(model, context, ks, reps);
    std::printf("| K proposed | pass ms | cost vs 1 row | tokens/pass to break even | speedup at a=0.5 | a=0.7 | a=0.9 |\n"
                "|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < ks.size(); ++i) {
      const double c = cost[i] / cost[0];
      auto speedup = [&](double a) { return (1 - std::pow(a, ks[i] + 1)) / (1 - a) / c; };
      std::printf("| %d | %.2f | %.2fx | %.2f | %.2fx | %.2fx | %.2fx |\n", ks[i], cost[i] * 1e3, c, c, speedup(0.5),
                  speedup(0.7), speedup(0.9));
    }
    return 0;
    }
    std::string text = prompt_text;
    if (!prompt_file.empty()) {
      std::ifstream in(prompt_file);
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    std::vector<int32_t> prompt;
    {
      kvserve::GgufFile file(model);
      prompt = kvserve::Tokenizer(file).encode(text, true);
    }
    std::vector<double> off, on;
    int64_t proposed = 0, accepted = 0, counted = 0;
    for (int r = 0; r < rounds; ++r) {
      off.push_back(
          end_to_end(model, "off", draft, prompt, tokens, requests, streams, threads, num_tokens, kv_dtype).tokens_per_s);
      const Run s = end_to_end(model, method, draft, prompt, tokens, requests, streams, threads, num_tokens, kv_dtype);
      on.push_back(s.tokens_per_s);
      proposed += s.proposed;
      accepted += s.accepted;
      // One stream, requests one after another, each prompt in one step: that step emits one
      // token and every later step one plus those it accepted, so the stream itself counts them.
      counted += s.tokens - s.steps;
    }
    double mo = 0, mn = 0;
    for (double x : off) mo += x / off.size();
    for (double x : on) mn += x / on.size();
    const std::string shown =
        model.substr(model.find_last_of('/') + 1) + (method == "draft" ? ", draft " + draft.substr(draft.find_last_of('/') + 1) : "");
    std::printf("\n| %d stream(s), %zu-token prompt, %d out, greedy | off tok/s | %s tok/s | %s / off | accepted / proposed |\n"
                "|---|---|---|---|---|\n| %s | %.1f | %.1f | %.2fx | %lld / %lld (%.0f%%) |\n",
                streams, prompt.size(), tokens, method.c_str(), method.c_str(), shown.c_str(), mo, mn, mn / mo,
                static_cast<long long>(accepted), static_cast<long long>(proposed),
                proposed ? 100.0 * accepted / proposed : 0.0);
    if (streams == 1 && counted != accepted) {
      std::fprintf(stderr, "kvserve-bench-speculative: the engine counted %lld accepted tokens, the stream %lld\n",
                   static_cast<long long>(accepted), static_cast<long long>(counted));
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvserve-bench-speculative: %s\n", e.what());
    return 1;
  }
  return 0;
}
