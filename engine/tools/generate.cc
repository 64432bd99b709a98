// kvserve-generate: runs one prompt through the engine and prints only the continuation to
// stdout, streaming; logs and speed figures go to stderr.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>

#include "runtime/engine.h"
#include "runtime/queue_sink.h"

int main(int argc, char** argv) {
  CLI::App app{"Generate a continuation of a prompt"};
  kvserve::EngineOptions opts;
  kvserve::SamplingParams sp;
  std::string prompt;
  uint64_t seed = 0;
  bool have_seed = false;
  app.add_option("--model", opts.model.path, "GGUF file")->required();
  app.add_option("--prompt", prompt, "prompt text (BOS is added as the vocab says)");
  app.add_option("--max-tokens", sp.max_new_tokens, "tokens to generate")->capture_default_str();
  sp.temperature = 0.8f;
  app.add_option("--temperature", sp.temperature, "0 = greedy")->capture_default_str();
  app.add_option("--top-k", sp.top_k, "0 = off")->capture_default_str();
  app.add_option("--top-p", sp.top_p, "1 = off")->capture_default_str();
  app.add_option("--min-p", sp.min_p, "0 = off")->capture_default_str();
  auto* seed_opt = app.add_option("--seed", seed, "sampling seed");
  app.add_flag("--ignore-eos", sp.ignore_eos, "keep generating past EOS");
  app.add_option("--threads", opts.model.num_threads, "compute threads (0 = all cores)");
  app.add_option("--ctx", opts.scheduler.max_model_len, "max_model_len (0 = model's)");
  CLI11_PARSE(app, argc, argv);
  have_seed = seed_opt->count() > 0;
  if (have_seed) sp.seed = seed;
  spdlog::set_default_logger(spdlog::stderr_color_mt("kvserve"));

  try {
    kvserve::Engine engine(opts);
    kvserve::Request req;
    req.prompt = engine.tokenizer().encode(prompt, true);
    if (req.prompt.empty()) req.prompt.push_back(engine.tokenizer().bos_id());
    const int32_t room = engine.model_info().max_model_len - static_cast<int32_t>(req.prompt.size());
    sp.max_new_tokens = std::min(sp.max_new_tokens, std::max(room, 1));
    req.sampling = sp;
    auto sink = std::make_shared<kvserve::QueueSink>();
    kvserve::SubmitResult r = engine.submit(req, sink);
    if (!r.ok()) {
      std::fprintf(stderr, "kvserve-generate: %s\n", r.message.c_str());
      return 1;
    }
    for (;;) {
      auto ev = sink->pop();
      if (!ev) continue;
      std::fwrite(ev->text.data(), 1, ev->text.size(), stdout);
      std::fflush(stdout);
      if (ev->completion) {
        const auto& c = *ev->completion;
        if (isatty(STDOUT_FILENO)) std::printf("\n");
        const double decode_s = c.total_time_s - c.time_to_first_token_s;
        std::fprintf(stderr,
                     "finish=%s prompt=%d tokens in %.3f s (%.1f tok/s), generated=%d tokens, decode %.1f tok/s\n",
                     kvserve::finish_reason_name(c.reason), c.prompt_tokens, c.time_to_first_token_s,
                     c.prompt_tokens / std::max(c.time_to_first_token_s, 1e-9), c.completion_tokens,
                     c.completion_tokens > 1 ? (c.completion_tokens - 1) / std::max(decode_s, 1e-9) : 0.0);
        if (c.reason == kvserve::FinishReason::kError) {
          std::fprintf(stderr, "kvserve-generate: %s\n", c.error.c_str());
          return 1;
        }
        break;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvserve-generate: %s\n", e.what());
    return 1;
  }
  return 0;
}
