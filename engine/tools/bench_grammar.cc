// kvserve-bench-grammar: what constrained decoding costs on one model's vocabulary.
//   1. Mask time per token: for each JSON-Schema case of a JSON-lines file (as kvserve-
//      constrained reads), compile it, then walk it with random allowed tokens, timing every
//      mask: the first walk (token classes computed as positions are first reached) and the
//      later ones (what a schema sent again costs); mean, p50, p99 and max.
//   2. Decode throughput through the engine with a schema that keeps generating (strings in a
//      long array) against the same requests unconstrained, at each batch size; runs alternate
//      and each figure is the median of --repeats, as a ratio measured in the same run.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "grammar/constraint.h"
#include "runtime/engine.h"
#include "runtime/queue_sink.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::ordered_json;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}
double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

struct MaskTimes {
  std::vector<double> cold, warm;  // microseconds per mask
  double compile_ms = 0;
};

// Walks a compiled grammar with tokens drawn uniformly from each mask, up to `steps` masks.
void walk(const std::shared_ptr<kvserve::grammar::CompiledGrammar>& g, int steps, std::mt19937& rng,
          std::vector<double>* times) {
  kvserve::grammar::GrammarMatcher m(g);
  const std::vector<int32_t>& eog = g->index().eog();
  std::vector<uint64_t> mask;
  std::vector<int32_t> allowed;
  for (int s = 0; s < steps && !m.ended(); ++s) {
    const auto t0 = Clock::now();
    m.fill_mask(mask);
    times->push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    allowed.clear();
    for (size_t w = 0; w < mask.size(); ++w)
      for (uint64_t bits = mask[w]; bits; bits &= bits - 1)
        allowed.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(__builtin_ctzll(bits))));
    if (allowed.empty()) break;
    // End where allowed half the time, so walks finish and every part of a schema is reached.
    int32_t pick = allowed[rng() % allowed.size()];
    if (m.complete() && !eog.empty() && rng() % 2) pick = eog[0];
    m.accept(pick);
  }
}

// Decode tokens/s of `batch` requests generating `gen` tokens each, constrained or not.
double decode_rate(kvserve::Engine& engine, int batch, int gen, const kvserve::OutputConstraint& c, uint64_t seed) {
  auto sink = std::make_shared<kvserve::QueueSink>();
  const std::vector<int32_t> prompt = engine.tokenizer().encode("Write a list of short names in JSON:", true);
  for (int i = 0; i < batch; ++i) {
    kvserve::Request r;
    r.prompt = prompt;
    r.sampling.max_new_tokens = gen;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed + static_cast<uint64_t>(i);
    r.sampling.ignore_eos = true;
    r.sampling.constraint = c;
    if (auto s = engine.submit(r, sink); !s.ok()) throw std::runtime_error("submit refused: " + s.message);
  }
  int done = 0, tokens = 0;
  Clock::time_point first{};
  bool started = false;
  while (done < batch) {
    auto ev = sink->pop();
    if (!ev) continue;
    if (!started && !ev->token_ids.empty()) {
      first = Clock::now();  // decode time from the first token on (prompts are done)
      started = true;
    } else {
      tokens += static_cast<int>(ev->token_ids.size());
    }
    if (ev->completion) {
      if (ev->completion->reason == kvserve::FinishReason::kError) throw std::runtime_error(ev->completion->error);
      ++done;
    }
  }
  return tokens / std::chrono::duration<double>(Clock::now() - first).count();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"What constrained decoding costs: mask time per token and decode throughput"};
  kvserve::EngineOptions opts;
  std::string cases_path, json_out;
  int walks = 3, steps = 200, gen = 64, repeats = 3;
  std::vector<int> batches = {1, 16};
  app.add_option("--model", opts.model.path, "GGUF file")->required();
  app.add_option("--cases", cases_path, "JSON-lines cases; those with json_schema are timed")->required();
  app.add_option("--walks", walks, "random walks per schema (the first is cold)")->capture_default_str();
  app.add_option("--steps", steps, "masks per walk at most")->capture_default_str();
  app.add_option("--gen", gen, "tokens per request in the throughput runs")->capture_default_str();
  app.add_option("--batches", batches, "batch sizes of the throughput runs")->delimiter(',');
  app.add_option("--repeats", repeats, "runs of each throughput figure (the median is kept)")->capture_default_str();
  app.add_option("--threads", opts.model.num_threads, "compute threads (0 = all cores)");
  app.add_option("--json", json_out, "also write the figures here as JSON");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::warn);
  try {
    kvserve::Engine engine(opts);
    auto index = kvserve::make_token_index(engine.tokenizer());
    std::ifstream in(cases_path);
    if (!in) throw std::runtime_error("cannot read " + cases_path);
    MaskTimes all;
    int schemas = 0;
    std::mt19937 rng(1);
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"json_schema\"") == std::string::npos) continue;
      const ordered_json c = ordered_json::parse(line);
      kvserve::OutputConstraint oc;
      oc.kind = kvserve::OutputConstraint::Kind::kJsonSchema;
      oc.text = c["json_schema"].dump();
      kvserve::grammar::GrammarCache cache(index, 0);
      const auto t0 = Clock::now();
      auto g = cache.get(oc);
      all.compile_ms += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      for (int w = 0; w < walks; ++w) walk(g, steps, rng, w == 0 ? &all.cold : &all.warm);
      ++schemas;
    }
    std::printf("vocabulary %d tokens; %d schemas, compile %.2f ms each\n", index->vocab_size(), schemas,
                all.compile_ms / std::max(schemas, 1));
    std::printf("mask per token (us): first walk   mean %.1f  p50 %.1f  p99 %.1f  max %.1f  (%zu masks)\n", mean(all.cold),
                percentile(all.cold, 0.5), percentile(all.cold, 0.99), percentile(all.cold, 1.0), all.cold.size());
    std::printf("                     later walks  mean %.1f  p50 %.1f  p99 %.1f  max %.1f  (%zu masks)\n", mean(all.warm),
                percentile(all.warm, 0.5), percentile(all.warm, 0.99), percentile(all.warm, 1.0), all.warm.size());
    ordered_json out = {{"vocab", index->vocab_size()},
                        {"schemas", schemas},
                        {"mask_us_cold", {{"mean", mean(all.cold)}, {"p99", percentile(all.cold, 0.99)}}},
                        {"mask_us_warm", {{"mean", mean(all.warm)}, {"p99", percentile(all.warm, 0.99)}}},
                        {"throughput", ordered_json::array()}};
    // A schema that keeps generating: short strings in an array of at least 1000.
    kvserve::OutputConstraint keep;
    keep.kind = kvserve::OutputConstraint::Kind::kJsonSchema;
    keep.text = R"({"type":"array","items":{"type":"string","maxLength":8},"minItems":1000})";
    const kvserve::OutputConstraint none;
    for (int b : batches) {
      std::vector<double> free_rate, schema_rate;
      decode_rate(engine, b, 8, keep, 99);  // warm: compiles and fills the token classes
      for (int r = 0; r < repeats; ++r) {
        free_rate.push_back(decode_rate(engine, b, gen, none, 7 + r));
        schema_rate.push_back(decode_rate(engine, b, gen, keep, 7 + r));
      }
      const double f = percentile(free_rate, 0.5), s = percentile(schema_rate, 0.5);
      std::printf("decode at %2d streams: unconstrained %.1f tok/s, with a schema %.1f tok/s: %.3f of unconstrained\n", b,
                  f, s, s / f);
      out["throughput"].push_back({{"streams", b}, {"free_tok_s", f}, {"schema_tok_s", s}, {"ratio", s / f}});
    }
    if (!json_out.empty()) std::ofstream(json_out) << out.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvserve-bench-grammar: %s\n", e.what());
    return 1;
  }
  return 0;
}
