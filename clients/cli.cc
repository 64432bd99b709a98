// kvserve-cli: a command-line client. `generate` streams text to stdout as it arrives; `info`,
// `stats`, `health` and `tokenize` print what the server says; `inspect` and `head-importance`
// look inside the heads (cli_inspect.h); `chat` talks over the HTTP API (cli_chat.h).
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>

#include "cli_chat.h"
#include "cli_inspect.h"
#include "cli_status.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "kvserve.grpc.pb.h"

namespace {

// The prompt argument as given, or "-": standard input; --prompt-file: that file.
bool read_prompt(std::string& prompt, const std::string& file) {
  const std::string path = !file.empty() ? file : prompt == "-" ? "/dev/stdin" : "";
  if (path.empty()) return true;
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  prompt.assign(std::istreambuf_iterator<char>(in), {});
  return true;
}

// The first word that is neither an option nor an option's value, when it names no command
// (CLI11 itself would only say that a subcommand is required).
std::string unknown_command(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("-", 0) == 0) {
      const CLI::Option* o = a.find('=') == std::string::npos ? app.get_option_no_throw(a) : nullptr;
      if (o && o->get_type_size() > 0) ++i;  // its value
      continue;
    }
    try {
      app.get_subcommand(a);
      return {};
    } catch (const CLI::OptionNotFound&) {
      return a;
    }
  }
  return {};
}

// "localhost" alone would be dialled on gRPC's default port for https (443): a server address
// without a port gets kvserve's (50051).
std::string with_default_port(const std::string& addr) {
  // Targets with a scheme ("dns:///h:1", "unix:/p", "ipv4:a:1") and bare IPv6 are left as given.
  if (addr.find("://") != std::string::npos || addr.rfind("unix:", 0) == 0 ||
      (addr.find(']') == std::string::npos && std::count(addr.begin(), addr.end(), ':') > 1))
    return addr;
  const size_t colon = addr.rfind(':');
  const size_t bracket = addr.rfind(']');
  const bool has_port = colon != std::string::npos && colon + 1 < addr.size() &&
                        (bracket == std::string::npos || bracket < colon) &&
                        addr.find_first_not_of("0123456789", colon + 1) == std::string::npos;
  return has_port ? addr : addr + ":50051";
}

const char* finish_name(kvserve::v1::FinishReason r) {
  return kvserve::v1::FinishReason_Name(r).c_str() + sizeof("FINISH_REASON_") - 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvserve-cli: talk to a kvserve server"};
  std::string addr = "127.0.0.1:50051";
  double timeout_s = 0;
  std::string token, tls_ca, tls_name;
  app.add_option("--addr", addr, "server HOST:PORT")->capture_default_str();
  app.add_option("--token", token, "bearer token for servers that require one");
  app.add_option("--tls-ca", tls_ca, "PEM root certificate: connect with TLS, trusting it");
  app.add_option("--tls-server-name", tls_name, "name to expect in the server certificate");
  app.add_option("--timeout", timeout_s, "deadline in seconds (0 = none)");
  app.require_subcommand(1);
  // Global options may also follow the command (`kvserve-cli generate "Hi" --addr host:50051`).
  app.fallthrough();

  auto* gen = app.add_subcommand("generate", "stream a continuation of PROMPT");
  std::string prompt, prompt_file, request_id;
  kvserve::v1::SamplingParams sp;
  // The API's own defaults (256 tokens, temperature 1.0): the CLI samples as any client would.
  int32_t max_tokens = 256, top_k = 0, top_logprobs = 0;
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f, rep = 1.0f, pres = 0.0f, freq = 0.0f;
  uint64_t seed = 0;
  std::vector<std::string> stops;
  bool ignore_eos = false, stats_after = false, logprobs = false;
  gen->add_option("prompt", prompt, "prompt text (- reads standard input)");
  gen->add_option("--prompt-file", prompt_file, "read the prompt from this file")->check(CLI::ExistingFile);
  gen->add_option("--max-tokens", max_tokens)->capture_default_str();
  gen->add_option("--temperature", temperature, "0 = greedy")->capture_default_str();
  gen->add_option("--top-k", top_k);
  gen->add_option("--top-p", top_p);
  gen->add_option("--min-p", min_p);
  gen->add_option("--repetition-penalty", rep);
  gen->add_option("--presence-penalty", pres);
  gen->add_option("--frequency-penalty", freq);
  auto* seed_opt = gen->add_option("--seed", seed);
  // One value per --stop, so that the prompt after it is not taken for a second stop string.
  gen->add_option("--stop", stops, "stop string (repeat the flag for more)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  gen->add_flag("--ignore-eos", ignore_eos);
  gen->add_flag("--logprobs", logprobs, "print each token's log-probability to stderr");
  gen->add_option("--top-logprobs", top_logprobs, "also print this many alternatives per token (implies --logprobs)");
  gen->add_option("--request-id", request_id);
  gen->add_flag("--verbose", stats_after, "print the completion summary to stderr");
  auto* info = app.add_subcommand("info", "model shape and KV cache cost");
  auto* stats = app.add_subcommand("stats", "engine counters");
  auto* health = app.add_subcommand("health", "grpc.health.v1 check; exit 0 when SERVING");
  auto* abort = app.add_subcommand("abort", "abort the running Generate with REQUEST_ID");
  std::string abort_id;
  abort->add_option("request_id", abort_id, "the request_id it was started with")->required();
  auto* tok = app.add_subcommand("tokenize", "token ids and pieces of TEXT");
  std::string text;
  tok->add_option("text", text)->required();
  auto* inspect = app.add_subcommand("inspect", "attention of every layer and head over PROMPT, scored and labelled");
  kvserve::InspectOptions inspect_options;
  std::string inspect_file;
  auto* inspect_text = inspect->add_option("prompt", inspect_options.prompt, "prompt text");
  inspect->add_option("--prompt-file", inspect_file, "read the prompt from this file (- for standard input)")
      ->excludes(inspect_text);
  inspect->add_option("--html", inspect_options.html_path,
                      "also write the head atlas here: one self-contained HTML page");
  inspect->add_option("--json", inspect_options.json_path,
                      "also write the response, float weights included, as JSON here");
  inspect->add_flag("--importance", inspect_options.importance,
                    "also measure each head's importance (HeadImportance on the same text) for the page");
  inspect->add_option("--budget", inspect_options.loss_budget,
                      "with --importance: allowed drop in mean log-likelihood, nats/token")
      ->capture_default_str();
  auto* importance = app.add_subcommand("head-importance", "rank heads by the likelihood drop when each is zeroed");
  std::string text_file;
  double loss_budget = 0.01;
  int top = 10;
  importance->add_option("--text", text_file, "file holding the text to score (- for standard input)")->required();
  importance->add_option("--budget", loss_budget, "allowed drop in mean log-likelihood, nats/token")->capture_default_str();
  importance->add_option("--top", top, "heads to list (0 = all)")->capture_default_str();
  auto* chat = app.add_subcommand("chat", "a conversation over the HTTP API: each line a turn, answers streamed");
  kvserve::ChatOptions chat_options;
  chat->add_option("--http", chat_options.http, "the server's HTTP API, HOST:PORT")->capture_default_str();
  chat->add_option("--system", chat_options.system, "a system message first");
  chat->add_option("--max-tokens", chat_options.max_tokens)->capture_default_str();
  chat->add_option("--temperature", chat_options.temperature)->capture_default_str();
  chat->add_flag("--quiet", chat_options.quiet, "no banner or prompts");
  auto* score = app.add_subcommand("score", "mean log-probability per token and perplexity of a text");
  std::string score_file;
  score->add_option("--text", score_file, "file holding the text (- for standard input)")->required();
  if (const std::string unknown = unknown_command(app, argc, argv); !unknown.empty()) {
    std::string names;
    for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
      names += (names.empty() ? "" : ", ") + sub->get_name();
    std::fprintf(stderr, "kvserve-cli: unknown command '%s' (commands: %s)\n", unknown.c_str(), names.c_str());
    return 2;
  }
  CLI11_PARSE(app, argc, argv);
  addr = with_default_port(addr);

  if (*chat) {
    chat_options.token = token;
    return kvserve::cli_chat(chat_options);
  }

  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  grpc::ChannelArguments args;
  if (!tls_ca.empty()) {
    std::ifstream in(tls_ca);
    if (!in) {
      std::fprintf(stderr, "kvserve-cli: cannot read %s\n", tls_ca.c_str());
      return 2;
    }
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs.assign(std::istreambuf_iterator<char>(in), {});
    creds = grpc::SslCredentials(ssl);
    if (!tls_name.empty()) args.SetSslTargetNameOverride(tls_name);
  }
  args.SetMaxReceiveMessageSize(1 << 30);  // attention matrices of long prompts are large
  auto channel = grpc::CreateCustomChannel(addr, creds, args);
  auto stub = kvserve::v1::Inference::NewStub(channel);
  // One context a call, each with the token and the deadline.
  const auto make_context = [&]() {
    auto c = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) c->AddMetadata("authorization", "Bearer " + token);
    if (timeout_s > 0)
      c->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000)));
    return c;
  };
  const std::unique_ptr<grpc::ClientContext> first_context = make_context();
  grpc::ClientContext& ctx = *first_context;

  if (*gen) {
    if (!read_prompt(prompt, prompt_file)) {
      std::fprintf(stderr, "kvserve-cli: cannot read the prompt from %s\n", prompt_file.c_str());
      return 2;
    }
    if (prompt.empty() && prompt_file.empty()) {
      std::fprintf(stderr, "kvserve-cli: generate needs a prompt: an argument, - for standard input, or --prompt-file\n");
      return 2;
    }
    if (stats_after)
      std::fprintf(stderr, "[sampling: max_tokens %d, temperature %g, top_p %g, top_k %d%s]\n", max_tokens, temperature,
                   top_p, top_k, temperature == 0.0f ? " (greedy)" : "");
    kvserve::v1::GenerateRequest req;
    req.set_prompt(prompt);
    req.set_request_id(request_id);
    auto* s = req.mutable_sampling();
    s->set_max_new_tokens(max_tokens);
    s->set_temperature(temperature);
    s->set_top_k(top_k);
    s->set_top_p(top_p);
    s->set_min_p(min_p);
    s->set_repetition_penalty(rep);
    s->set_presence_penalty(pres);
    s->set_frequency_penalty(freq);
    if (seed_opt->count()) s->set_seed(seed);
    for (const auto& st : stops) s->add_stop(st);
    s->set_ignore_eos(ignore_eos);
    s->set_top_logprobs(top_logprobs);
    s->set_logprobs(logprobs || top_logprobs > 0);
    auto reader = stub->Generate(&ctx, req);
    kvserve::v1::GenerateResponse resp;
    while (reader->Read(&resp)) {
      if (resp.has_chunk()) {
        std::fwrite(resp.chunk().text().data(), 1, resp.chunk().text().size(), stdout);
        std::fflush(stdout);
        // One line a token on stderr: "[logprob] token 403 -0.1234 | 385 -1.9 410 -3.0".
        for (const auto& lp : resp.chunk().logprobs()) {
          std::string line = "[logprob] token " + std::to_string(lp.token_id()) + " " + std::to_string(lp.logprob());
          if (lp.top_size()) line += " |";
          for (const auto& t : lp.top()) line += " " + std::to_string(t.token_id()) + " " + std::to_string(t.logprob());
          std::fprintf(stderr, "%s\n", line.c_str());
        }
      } else if (resp.has_complete() && stats_after) {
        const auto& c = resp.complete();
        std::fprintf(stderr, "\n[%s] finish=%s prompt=%d completion=%d ttft=%.3fs total=%.3fs peak_kv=%lld bytes\n",
                     c.request_id().c_str(), finish_name(c.finish_reason()), c.prompt_tokens(),
                     c.completion_tokens(), c.time_to_first_token_s(), c.total_time_s(),
                     static_cast<long long>(c.peak_kv_bytes()));
      }
    }
    std::printf("\n");  // the text ends its line, on a terminal or in a file
    grpc::Status st = reader->Finish();
    return st.ok() ? 0 : kvserve::cli_fail(st, addr);
  }
  if (*score) {
    std::ifstream file(score_file == "-" ? "/dev/stdin" : score_file, std::ios::binary);
    if (!file) {
      std::fprintf(stderr, "kvserve-cli: cannot read %s\n", score_file.c_str());
      return 2;
    }
    kvserve::v1::GenerateRequest req;
    req.set_prompt(std::string(std::istreambuf_iterator<char>(file), {}));
    req.mutable_sampling()->set_max_new_tokens(1);
    req.mutable_sampling()->set_temperature(0.0f);
    req.mutable_sampling()->set_prompt_logprobs(0);
    auto reader = stub->Generate(&ctx, req);
    kvserve::v1::GenerateResponse resp;
    double sum = 0;
    int n = 0;
    while (reader->Read(&resp))
      if (resp.has_complete())
        for (const auto& t : resp.complete().prompt_logprobs()) sum += t.logprob(), ++n;
    grpc::Status st = reader->Finish();
    if (!st.ok()) return kvserve::cli_fail(st, addr);
    if (n == 0) {
      std::fprintf(stderr, "kvserve-cli: the text has fewer than two tokens: nothing to score\n");
      return 1;
    }
    std::printf("tokens scored: %d\nmean log-probability: %.6f nats/token\nperplexity: %.4f\n", n, sum / n,
                std::exp(-sum / n));
    return 0;
  }
  if (*info) {
    kvserve::v1::GetModelInfoResponse r;
    grpc::Status st = stub->GetModelInfo(&ctx, {}, &r);
    if (!st.ok()) return kvserve::cli_fail(st, addr);
    const auto& kv = r.kv_bytes_per_token();
    std::printf("model: %s (%s), %.1fM params, %s kernels\n", r.name().c_str(), r.architecture().c_str(),
                r.num_params() / 1e6, r.kernels().c_str());
    std::printf("weights: file %s; held as %s: %.1f MiB in memory, %.1f MiB streamed per decode step\n",
                r.weight_type().c_str(), r.weights_held_as().c_str(), r.weight_bytes() / 1048576.0,
                r.weight_bytes_per_step() / 1048576.0);
    std::printf("layers %d, hidden %d, heads %d, KV heads %d, head dim %d, ffn %d, vocab %d\n", r.n_layers(),
                r.hidden_size(), r.n_heads(), r.n_kv_heads(), r.head_dim(), r.ffn_size(), r.vocab_size());
    std::printf("context: model %d, max_model_len %d\n", r.max_context(), r.max_model_len());
    const std::string element = kv.has_element_size() ? kv.element_size() : std::to_string(kv.element_bytes());
    std::printf("KV bytes per token: %d x %d layers x %d KV heads x %d head dim x %s bytes = %lld\n",
                kv.kv_factor(), kv.n_layers(), kv.n_kv_heads(), kv.head_dim(), element.c_str(),
                static_cast<long long>(kv.total()));
    std::printf("KV cache: %d blocks x %d tokens = %lld tokens, %.2f MiB\n", r.num_blocks(), r.block_size(),
                static_cast<long long>(r.token_capacity()), r.kv_cache_bytes() / 1048576.0);
    std::printf("KV layout: %s\n", r.kv_layout().c_str());
    if (r.kv_windowed_layers() > 0)
      std::printf("a %d-token request holds %lld token-layers on %d windowed layers (window %d) and %lld on %d full "
                  "layers: %.2f MiB\n",
                  r.max_model_len(), static_cast<long long>(r.kv_request_token_layers_windowed()),
                  r.kv_windowed_layers(), r.sliding_window(), static_cast<long long>(r.kv_request_token_layers_full()),
                  r.kv_full_layers(), r.kv_bytes_per_request() / 1048576.0);
    std::printf("max concurrency at %d tokens: %.2fx\n", r.max_model_len(), r.max_concurrency());
    std::printf("max_num_seqs %d, max_num_batched_tokens %d\n", r.max_num_seqs(), r.max_num_batched_tokens());
    std::printf("KV what-if (same budget): %-6s %12s %12s %10s\n", "layout", "bytes/token", "tokens", "concurrency");
    for (const auto& v : r.kv_what_if())
      std::printf("                          %-6s %12lld %12lld %9.2fx\n", v.name().c_str(),
                  static_cast<long long>(v.bytes_per_token()), static_cast<long long>(v.token_capacity()),
                  v.max_concurrency());
    return 0;
  }
  if (*stats) {
    kvserve::v1::GetStatsResponse r;
    grpc::Status st = stub->GetStats(&ctx, {}, &r);
    if (!st.ok()) return kvserve::cli_fail(st, addr);
    std::printf("running %d, waiting %d, preemptions %lld\n", r.num_requests_running(), r.num_requests_waiting(),
                static_cast<long long>(r.num_preemptions_total()));
    std::printf("blocks %d used / %d free / %d total (%.1f%%), tokens cached %lld\n", r.blocks_used(),
                r.blocks_free(), r.blocks_total(), 100 * r.kv_cache_usage(), static_cast<long long>(r.tokens_cached()));
    std::printf("prefix caching %s: hit rate %.1f%%, %d cached blocks, %lld evictions\n",
                r.prefix_caching() ? "on" : "off", 100 * r.prefix_cache_hit_rate(), r.cached_blocks(),
                static_cast<long long>(r.prefix_cache_evictions_total()));
    std::printf("prompt tokens %lld, generated tokens %lld, requests finished %lld, steps %lld\n",
                static_cast<long long>(r.prompt_tokens_total()), static_cast<long long>(r.generation_tokens_total()),
                static_cast<long long>(r.requests_finished_total()), static_cast<long long>(r.steps_total()));
    return 0;
  }
  if (*health) {
    auto hstub = grpc::health::v1::Health::NewStub(channel);
    grpc::health::v1::HealthCheckResponse r;
    grpc::Status st = hstub->Check(&ctx, {}, &r);
    if (!st.ok()) return kvserve::cli_fail(st, addr);
    std::printf("%s\n", grpc::health::v1::HealthCheckResponse::ServingStatus_Name(r.status()).c_str());
    return r.status() == grpc::health::v1::HealthCheckResponse::SERVING ? 0 : 1;
  }
  if (*inspect) {
    if (!read_prompt(inspect_options.prompt, inspect_file == "-" ? "/dev/stdin" : inspect_file)) {
      std::fprintf(stderr, "kvserve-cli: cannot read the prompt from %s\n", inspect_file.c_str());
      return 2;
    }
    if (inspect_options.prompt.empty()) {
      std::fprintf(stderr, "kvserve-cli: inspect needs a prompt: an argument, - for standard input, or --prompt-file\n");
      return 2;
    }
    return kvserve::cli_inspect(*stub, make_context, inspect_options);
  }
  if (*importance) {
    std::ifstream in(text_file == "-" ? "/dev/stdin" : text_file, std::ios::binary);
    const std::string body((std::istreambuf_iterator<char>(in)), {});
    return kvserve::cli_head_importance(*stub, ctx, body, loss_budget, top);
  }
  if (*tok) {
    kvserve::v1::TokenizeRequest req;
    req.set_text(text);
    kvserve::v1::TokenizeResponse r;
    grpc::Status st = stub->Tokenize(&ctx, req, &r);
    if (!st.ok()) return kvserve::cli_fail(st, addr);
    for (int i = 0; i < r.token_ids_size(); ++i) std::printf("%s%d", i ? " " : "", r.token_ids(i));
    std::printf("\n");
    // Then each token's piece, quoted, as the vocabulary spells it ("▁Once", "Ġworld").
    for (int i = 0; i < r.pieces_size(); ++i) std::printf("%s'%s'", i ? " " : "", r.pieces(i).c_str());
    if (r.pieces_size()) std::printf("\n");
    return 0;
  }
  if (*abort) {
    kvserve::v1::AbortRequest req;
    req.set_request_id(abort_id);
    kvserve::v1::AbortResponse r;
    grpc::Status st = stub->Abort(&ctx, req, &r);
    if (!st.ok()) return kvserve::cli_fail(st, addr);
    std::printf("%s\n", r.found() ? "aborted" : "not found (no running Generate has that id for this token)");
    return r.found() ? 0 : 1;
  }
  return 0;
}
