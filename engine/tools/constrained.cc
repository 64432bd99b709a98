// kvserve-constrained: generates under constraints through the engine, many requests at once,
// and prints each output as a JSON line (name, sample, finish, text) for an independent checker
// (tests/tools/test_constrained_outputs.py validates them with Python's json, jsonschema and re).
//
// Cases come one per line of a JSON-lines file, each with a "name" and one of "json_schema"
// (a schema), "json_object" (true), "regex", "choice" (an array of strings) or "grammar" (GBNF).
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "runtime/engine.h"
#include "runtime/queue_sink.h"

namespace {

using json = nlohmann::ordered_json;  // a schema keeps its properties' order

kvserve::OutputConstraint constraint_of(const json& c) {
  kvserve::OutputConstraint k;
  if (c.contains("json_schema")) {
    k.kind = kvserve::OutputConstraint::Kind::kJsonSchema;
    k.text = c["json_schema"].dump();
  } else if (c.contains("json_object")) {
    k.kind = kvserve::OutputConstraint::Kind::kJsonObject;
  } else if (c.contains("regex")) {
    k.kind = kvserve::OutputConstraint::Kind::kRegex;
    k.text = c["regex"].get<std::string>();
  } else if (c.contains("choice")) {
    k.kind = kvserve::OutputConstraint::Kind::kChoice;
    k.choices = c["choice"].get<std::vector<std::string>>();
  } else if (c.contains("grammar")) {
    k.kind = kvserve::OutputConstraint::Kind::kGrammar;
    k.text = c["grammar"].get<std::string>();
  } else {
    throw std::runtime_error("case " + c.value("name", std::string("?")) + " has no constraint");
  }
  return k;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Generate under constraints and print the outputs as JSON lines"};
  kvserve::EngineOptions opts;
  std::string cases_path, prompt = "Answer in JSON.";
  int32_t samples = 4, max_tokens = 256, parallel = 16;
  float temperature = 1.0f;
  uint64_t seed = 1;
  app.add_option("--model", opts.model.path, "GGUF file")->required();
  app.add_option("--cases", cases_path, "JSON-lines file of cases")->required();
  app.add_option("--samples", samples, "outputs per case")->capture_default_str();
  app.add_option("--max-tokens", max_tokens, "tokens per output at most")->capture_default_str();
  app.add_option("--temperature", temperature, "sampling temperature")->capture_default_str();
  app.add_option("--seed", seed, "first seed (sample i of every case uses seed + i)")->capture_default_str();
  app.add_option("--prompt", prompt, "the prompt of every request")->capture_default_str();
  app.add_option("--parallel", parallel, "requests in flight at once")->capture_default_str();
  app.add_option("--threads", opts.model.num_threads, "compute threads (0 = all cores)");
  CLI11_PARSE(app, argc, argv);
  spdlog::set_default_logger(spdlog::stderr_color_mt("kvserve"));
  spdlog::set_level(spdlog::level::warn);

  try {
    std::vector<json> cases;
    std::ifstream in(cases_path);
    if (!in) throw std::runtime_error("cannot read " + cases_path);
    for (std::string line; std::getline(in, line);)
      if (line.find_first_not_of(" \t\r") != std::string::npos) cases.push_back(json::parse(line));
    kvserve::Engine engine(opts);
    std::vector<int32_t> ids = engine.tokenizer().encode(prompt, true);
    if (ids.empty()) ids.push_back(engine.tokenizer().bos_id());
    struct Job {
      size_t c;
      int32_t sample;
    };
    std::vector<Job> jobs;
    for (size_t c = 0; c < cases.size(); ++c)
      for (int32_t i = 0; i < samples; ++i) jobs.push_back({c, i});
    struct Live {
      Job job;
      std::string text;
      int32_t tokens = 0;
    };
    auto sink = std::make_shared<kvserve::QueueSink>();
    std::map<uint64_t, Live> live;
    size_t next = 0;
    int failures = 0;
    while (next < jobs.size() || !live.empty()) {
      while (next < jobs.size() && static_cast<int32_t>(live.size()) < parallel) {
        const Job j = jobs[next++];
        kvserve::Request r;
        r.prompt = ids;
        r.sampling.max_new_tokens = max_tokens;
        r.sampling.temperature = temperature;
        r.sampling.seed = seed + static_cast<uint64_t>(j.sample);
        r.sampling.constraint = constraint_of(cases[j.c]);
        kvserve::SubmitResult res = engine.submit(r, sink);
        if (!res.ok()) {
          json out = {{"name", cases[j.c].value("name", "")}, {"sample", j.sample}, {"finish", "rejected"},
                      {"error", res.message}};
          std::printf("%s\n", out.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
          ++failures;
          continue;
        }
        live[res.id] = {j, {}, 0};
      }
      if (live.empty()) continue;
      std::optional<kvserve::Event> ev = sink->pop();
      if (!ev) continue;
      Live& l = live.at(ev->id);
      l.text += ev->text;
      l.tokens += static_cast<int32_t>(ev->token_ids.size());
      if (!ev->completion) continue;
      json out = {{"name", cases[l.job.c].value("name", "")}, {"sample", l.job.sample},
                  {"finish", kvserve::finish_reason_name(ev->completion->reason)}, {"text", l.text},
                  {"tokens", l.tokens}};
      if (ev->completion->reason == kvserve::FinishReason::kError) {
        out["error"] = ev->completion->error;
        ++failures;
      }
      std::printf("%s\n", out.dump(-1, ' ', false, json::error_handler_t::replace).c_str());
      live.erase(ev->id);
    }
    std::fflush(stdout);
    return failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvserve-constrained: %s\n", e.what());
    return 2;
  }
}
