// kvserve: the gRPC inference server. Reads the config, applies command-line overrides, loads
// the model, serves until SIGTERM/SIGINT, then drains within the grace period and exits 0.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "version.h"
#include "gguf/gguf.h"
#include "http/http_server.h"
#include "kernels/cpu_features.h"
#include "runtime/cpu_budget.h"
#include "runtime/engine.h"
#include "inference_service.h"
#include "kv_event_publisher.h"
#include "metrics.h"
#include "server_options.h"

namespace {

// Linking gRPC's reflection library registers its plugin with every ServerBuilder; this option
// takes it out again when reflection is off.
class WithoutReflection : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    std::erase_if(*plugins, [](const auto& p) { return p->name() == "proto_server_reflection"; });
  }
};

void log_startup(const kvserve::Engine& engine) {
  const kvserve::ModelInfo& m = engine.model_info();
  spdlog::info("model '{}' ({}): {} layers, hidden {}, {} query heads over {} KV heads, head dim {}, ffn {}, "
               "vocab {}, {:.1f}M params, trained context {}",
               m.name, m.architecture, m.n_layer, m.n_embd, m.n_head, m.n_head_kv, m.head_dim, m.n_ff, m.n_vocab,
               m.n_params / 1e6, m.n_ctx_train);
  spdlog::info("weights: file {}; held as {}: {:.1f} MiB in memory, {:.1f} MiB streamed per decode step",
               m.weight_type, m.weights_held_as, m.weight_bytes / 1048576.0, m.weight_bytes_per_step / 1048576.0);
  spdlog::info("CPU kernels: {} (model.kernels \"{}\"); {} compute threads ({})", m.kernels,
               engine.options().model.kernels, m.num_threads, m.threads_reason);
  spdlog::info("matmul plan at 1, 4, 16, 64, 512 rows: {}", m.matmul_plan);
  if (m.mla.on())
    spdlog::info("KV cache bytes per token: latent attention, 1 row x {} layers x ({} latent + {} rotary) x {} bytes "
                 "= {} bytes; each head's K and V instead: {} layers x {} heads x (K {} + {} and V {}) x {} bytes = {} "
                 "bytes ({:.1f}x)",
                 m.n_layer, m.mla.kv_lora_rank, m.mla.qk_rope_dim, m.kv_element_size, m.kv_bytes_per_token, m.n_layer,
                 m.n_head, m.mla.qk_nope_dim, m.mla.qk_rope_dim, m.mla.v_head_dim, m.kv_element_size,
                 m.kv_bytes_per_token_multi_head, double(m.kv_bytes_per_token_multi_head) / m.kv_bytes_per_token);
  else
    spdlog::info("KV cache bytes per token: 2 (K,V) x {} layers x {} KV heads x {} head dim x {} bytes = {} bytes",
                 m.n_layer, m.n_head_kv, m.head_dim, m.kv_element_size, m.kv_bytes_per_token);
  spdlog::info("KV cache: {} blocks of {} tokens = {} tokens, {}", m.num_blocks, m.block_size, m.token_capacity,
               m.kv_total_bytes >= (int64_t{1} << 30) ? fmt::format("{:.2f} GiB", m.kv_total_bytes / double(1 << 30))
                                                      : fmt::format("{:.1f} MiB", m.kv_total_bytes / double(1 << 20)));
  const int32_t max_seqs = engine.options().scheduler.max_num_seqs;
  spdlog::info("Maximum concurrency for {} tokens per request: {:.2f}x{}", m.max_model_len,
               std::min<double>(m.max_concurrency, max_seqs),
               m.max_concurrency > max_seqs
                   ? fmt::format(" (scheduler.max_num_seqs {}; the cache alone holds {:.2f}x)", max_seqs, m.max_concurrency)
                   : std::string());
  if (m.max_request_tokens < m.max_model_len)
    spdlog::warn("the KV cache ({} tokens) is smaller than one full-length request (max_model_len {}): no request "
                 "may exceed {} tokens; raise cache.memory_bytes or lower scheduler.max_model_len",
                 m.token_capacity, m.max_model_len, m.max_request_tokens);
  if (m.kv_windowed_layers > 0)
    spdlog::info("sliding window: {} of {} layers see their last {} positions and release the blocks behind them "
                 "({}); a {}-token request holds at most {} token-layers on those and {} on the {} full layers, "
                 "{:.1f} MiB in all ({:.1f} MiB without the release)",
                 m.kv_windowed_layers, m.n_layer, m.sliding_window, m.kv_layout, m.max_model_len,
                 m.kv_request_token_layers_windowed, m.kv_request_token_layers_full, m.kv_full_layers,
                 m.kv_bytes_per_request / double(1 << 20),
                 double(m.kv_bytes_per_token) * m.max_model_len / double(1 << 20));
  else if (m.sliding_window > 0)
    spdlog::info("sliding window of {} positions on some layers, no shorter than max_model_len: nothing to release",
                 m.sliding_window);
  for (const auto& v : m.kv_what_if)
    spdlog::info("KV what-if {:>6}: {:>9} bytes/token, {:>10} tokens, {:.2f}x at {} tokens", v.name, v.bytes_per_token,
                 v.token_capacity, v.max_concurrency, m.max_model_len);
  spdlog::info("prefix caching: {}", engine.options().cache.enable_prefix_caching ? "on" : "off");
  spdlog::info("chat template: {}", m.chat_template);
  const auto& s = engine.options().scheduler;
  spdlog::info("scheduler: max_num_seqs {}, max_num_batched_tokens {}, max_model_len {}, max_waiting {}",
               s.max_num_seqs, s.max_num_batched_tokens, s.max_model_len, s.max_waiting);
  spdlog::info("speculative decoding: {}", m.speculative == "off" ? "off (speculative.method)" : m.speculative);
}

// What is about to be loaded, said before the load (which can take many seconds): the file, its
// size, architecture and tensor types.
void log_before_load(const std::string& path) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec) {  // the load that follows says why it cannot be read
    spdlog::info("loading model {}", path);
    return;
  }
  try {
    kvserve::GgufFile f(path);
    std::map<kvserve::TensorType, int64_t> types;
    for (const auto& t : f.tensors()) types[t.type] += static_cast<int64_t>(t.n_bytes());
    const kvserve::GgufValue* arch = f.find("general.architecture");
    const kvserve::GgufValue* name = f.find("general.name");
    spdlog::info("loading model {} ({:.1f} MiB): architecture '{}', name '{}', {} tensors: {}", path,
                 static_cast<double>(bytes) / 1048576.0, arch ? arch->as_string("general.architecture") : "?",
                 name ? name->as_string("general.name") : "", f.tensors().size(), kvserve::tensor_type_mix(types));
  } catch (const std::exception& e) {
    spdlog::info("loading model {} ({:.1f} MiB)", path, static_cast<double>(bytes) / 1048576.0);
  }
}

// Resident memory of this process in MiB (VmRSS), the load's progress while weights are copied in.
double resident_mib() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kvserve: gRPC inference server for causal language models on CPUs"};
  std::string config_path, model, listen, port_file;
  std::vector<std::string> overrides;
  int32_t threads = -1;
  // A flag given twice takes its last value, so arguments appended to a container's ENTRYPOINT
  // (`docker run IMAGE --listen ...`) override the image's own.
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.set_version_flag("--version", std::string("kvserve ") + kvserve::server_version());
  app.add_option("--config", config_path, "JSON config file (see configs/)");
  app.add_option("--model", model, "GGUF model (overrides model.path)");
  app.add_option("--listen", listen, "HOST:PORT to serve on (overrides server.listen)");
  app.add_option("--threads", threads, "compute threads (overrides model.num_threads)");
  app.add_option("--port-file", port_file, "write the bound port to this file");
  app.add_option("--set", overrides, "override any config field: section.field=value (repeatable)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  CLI11_PARSE(app, argc, argv);

  kvserve::ServeConfig cfg;
  try {
    nlohmann::json config = config_path.empty() ? nlohmann::json::object() : kvserve::load_json_file(config_path);
    if (!config_path.empty()) kvserve::resolve_config_paths(config, config_path);
    if (!model.empty()) overrides.push_back("model.path=\"" + model + "\"");
    if (!listen.empty()) overrides.push_back("server.listen=\"" + listen + "\"");
    if (threads >= 0) overrides.push_back("model.num_threads=" + std::to_string(threads));
    if (!port_file.empty()) overrides.push_back("server.port_file=\"" + port_file + "\"");
    kvserve::apply_overrides(config, overrides);
    cfg = kvserve::serve_config_from_json(config);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvserve: config error: %s\n", e.what());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(cfg.server.log_level));

  // SIGTERM/SIGINT are taken by sigwait below; blocked before any thread starts so none gets them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  spdlog::info("kvserve {} starting", kvserve::server_version());
  if (cfg.engine.cache.num_blocks > 0)
    spdlog::info("cache.num_blocks {} is set: the cache has that many blocks, and cache.memory_bytes is not used",
                 cfg.engine.cache.num_blocks);
  log_before_load(cfg.engine.model.path);
  {
    const kvserve::CpuBudget budget = kvserve::cpu_budget();
    const int threads = cfg.engine.model.num_threads > 0 ? cfg.engine.model.num_threads : budget.threads;
    spdlog::info("{} compute threads ({}); CPU kernels {} (model.kernels \"{}\", best here: {})", threads,
                 cfg.engine.model.num_threads > 0 ? "model.num_threads" : budget.reason,
                 cfg.engine.model.kernels == "auto" ? kvserve::level_name(kvserve::best_supported_level())
                                                    : cfg.engine.model.kernels.c_str(),
                 cfg.engine.model.kernels, kvserve::level_name(kvserve::best_supported_level()));
  }
  std::unique_ptr<kvserve::Engine> engine;
  const auto load_start = std::chrono::steady_clock::now();
  {
    // Progress every two seconds while the engine loads the weights and sizes the cache.
    std::mutex mu;
    std::condition_variable cv;
    bool loaded = false;
    std::thread progress([&] {
      std::unique_lock lock(mu);
      while (!cv.wait_for(lock, std::chrono::seconds(2), [&] { return loaded; }))
        spdlog::info("loading: {:.0f} s, {:.0f} MiB resident",
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count(),
                     resident_mib());
    });
    std::string error;
    try {
      engine = std::make_unique<kvserve::Engine>(cfg.engine);
    } catch (const std::exception& e) {
      error = e.what();
    }
    {
      std::lock_guard lock(mu);
      loaded = true;
    }
    cv.notify_all();
    progress.join();
    if (!error.empty()) {
      spdlog::error("cannot start: {}", error);
      return 1;
    }
  }
  spdlog::info("model loaded and cache allocated in {:.1f} s",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
  log_startup(*engine);
  if (!cfg.server.kv_events_endpoint.empty()) {
    try {
      auto publisher = std::make_shared<kvserve::KvEventPublisher>(cfg.server.kv_events_endpoint, cfg.server.kv_events_topic);
      spdlog::info("KV-cache events (vLLM's format) published on {}{}", publisher->bound_endpoint(),
                   cfg.server.kv_events_topic.empty() ? "" : ", topic \"" + cfg.server.kv_events_topic + "\"");
      if (!cfg.server.port_file.empty()) {
        const std::string& b = publisher->bound_endpoint();
        std::ofstream(cfg.server.port_file + ".kvevents") << b.substr(b.rfind(':') + 1) << "\n";
      }
      engine->set_kv_event_listener(std::move(publisher));
    } catch (const std::exception& e) {
      spdlog::error("cannot start: {}", e.what());
      return 2;
    }
  }
  // Only logged: libgomp reads it before main. Unset means libgomp's long default spin, which
  // costs nothing on cores of the server's own but starves any process sharing them.
  const char* spin = std::getenv("GOMP_SPINCOUNT");
  spdlog::info("OpenMP workers spin {} times between regions before sleeping{}", spin ? spin : "300000 (default)",
               spin ? "" : "; set GOMP_SPINCOUNT=3000 (as scripts/serve.sh does) if the cores are shared");

  std::vector<std::string> tokens;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  std::string tls_cert, tls_key;
  try {
    if (!cfg.server.auth_token_file.empty()) tokens = kvserve::load_bearer_tokens(cfg.server.auth_token_file);
    if (!cfg.server.tls_cert_file.empty()) {
      auto slurp = [](const std::string& path, const char* field) {
        std::ifstream in(path);
        if (!in) throw kvserve::ConfigError(std::string(field) + ": cannot read " + path);
        return std::string(std::istreambuf_iterator<char>(in), {});
      };
      tls_key = slurp(cfg.server.tls_key_file, "server.tls_key_file");
      tls_cert = slurp(cfg.server.tls_cert_file, "server.tls_cert_file");
      grpc::SslServerCredentialsOptions ssl;
      ssl.pem_key_cert_pairs.push_back({tls_key, tls_cert});
      creds = grpc::SslServerCredentials(ssl);
    }
  } catch (const std::exception& e) {
    spdlog::error("cannot start: {}", e.what());
    return 2;
  }
  spdlog::info("TLS {}, bearer-token authentication {}", cfg.server.tls_cert_file.empty() ? "off" : "on",
               tokens.empty() ? "off" : "on (" + std::to_string(tokens.size()) + " tokens)");
  kvserve::ServiceState state(*engine, kvserve::BearerAuth(std::move(tokens)), cfg.server.inspect_max_tokens,
                              cfg.server.max_inspect_calls);
  kvserve::InferenceService service(state);
  grpc::EnableDefaultHealthCheckService(true);
  const bool reflection = cfg.server.reflection == "on" || (cfg.server.reflection == "auto" && !state.auth().enabled());
  if (reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  spdlog::info("gRPC server reflection {}{}", reflection ? "on" : "off",
               cfg.server.reflection == "auto" && state.auth().enabled()
                   ? " (bearer tokens are configured and reflection cannot check them; server.reflection=\"on\" opens it)"
                   : state.auth().enabled() && reflection ? " WITHOUT a token check (server.reflection=\"on\")" : "");
  grpc::ServerBuilder builder;
  if (!reflection) builder.SetOption(std::make_unique<WithoutReflection>());
  // gRPC sets SO_REUSEPORT by default: a second server on the same port would then share the
  // traffic silently. Bind exclusively, so it fails at start-up instead.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort(cfg.server.listen, creds, &port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(cfg.server.max_message_bytes);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    spdlog::error("server.listen: cannot listen on {} (is another server using it? is the address this machine's?)",
                  cfg.server.listen);
    return 1;
  }
  // The overall status ("") and the service's own name, which probes often ask for.
  server->GetHealthCheckService()->SetServingStatus(true);
  server->GetHealthCheckService()->SetServingStatus(kvserve::v1::Inference::service_full_name(), true);
  const std::string host = cfg.server.listen.substr(0, cfg.server.listen.rfind(':'));
  spdlog::info("serving kvserve.v1.Inference on {}:{}", host, port);
  if (!cfg.server.port_file.empty()) {
    std::ofstream(cfg.server.port_file + ".tmp") << port << "\n";
    std::rename((cfg.server.port_file + ".tmp").c_str(), cfg.server.port_file.c_str());
  }

  std::unique_ptr<kvserve::MetricsServer> metrics;
  if (!cfg.server.metrics_listen.empty()) {
    const std::string& ml = cfg.server.metrics_listen;
    const size_t colon = ml.rfind(':');
    try {
      metrics = std::make_unique<kvserve::MetricsServer>(*engine, state.metrics(),
                                                         cfg.server.metrics_auth ? &state.auth() : nullptr);
      const int mport = metrics->start(ml.substr(0, colon), std::stoi(ml.substr(colon + 1)));
      spdlog::info("Prometheus metrics on http://{}:{}/metrics{}", ml.substr(0, colon), mport,
                   cfg.server.metrics_auth && state.auth().enabled() ? " (bearer token required)" : "");
      if (!cfg.server.port_file.empty()) std::ofstream(cfg.server.port_file + ".metrics") << mport << "\n";
    } catch (const std::exception& e) {
      spdlog::error("server.metrics_listen: cannot listen on {}: {}", ml, e.what());
      server->Shutdown(std::chrono::system_clock::now());
      return 1;
    }
  }

  std::unique_ptr<kvserve::HttpServer> http;
  if (cfg.server.http_listen.empty())
    spdlog::info("OpenAI-compatible HTTP API off (server.http_listen is empty; e.g. --set "
                 "server.http_listen=\"127.0.0.1:8000\")");
  if (!cfg.server.http_listen.empty()) {
    const std::string& hl = cfg.server.http_listen;
    const size_t colon = hl.rfind(':');
    // The names a request's "model" may use: the file's stem (as vLLM serves a path's name) and
    // general.name.
    kvserve::HttpOptions ho;
    ho.max_body_bytes = cfg.server.max_message_bytes;
    ho.metrics_auth = cfg.server.metrics_auth;
    ho.tls_cert_pem = tls_cert;
    ho.tls_key_pem = tls_key;
    ho.limits.header_timeout = std::chrono::milliseconds(cfg.server.http_header_timeout_ms);
    ho.limits.body_timeout = std::chrono::milliseconds(cfg.server.http_body_timeout_ms);
    ho.idle_timeout_s = cfg.server.http_idle_timeout_s;
    ho.max_connections_per_client = cfg.server.http_max_connections_per_client;
    ho.workers = cfg.server.http_workers;
    ho.model_ids.push_back(std::filesystem::path(cfg.engine.model.path).stem().string());
    if (!engine->model_info().name.empty()) ho.model_ids.push_back(engine->model_info().name);
    try {
      http = std::make_unique<kvserve::HttpServer>(state, ho);
      const int hport = http->start(hl.substr(0, colon), std::stoi(hl.substr(colon + 1)));
      spdlog::info("OpenAI-compatible HTTP API on {}://{}:{}/v1 (model \"{}\"){}", tls_cert.empty() ? "http" : "https",
                   hl.substr(0, colon), hport,
                   ho.model_ids.front(), state.auth().enabled() ? ", bearer token required" : "");
      spdlog::info("HTTP limits: headers within {} ms, body within {} ms, {} s without progress, {} connections per "
                   "client address, {} body workers",
                   cfg.server.http_header_timeout_ms, cfg.server.http_body_timeout_ms, cfg.server.http_idle_timeout_s,
                   cfg.server.http_max_connections_per_client, cfg.server.http_workers);
      if (!cfg.server.port_file.empty()) std::ofstream(cfg.server.port_file + ".http") << hport << "\n";
    } catch (const std::exception& e) {
      spdlog::error("server.http_listen: cannot listen on {}: {}", hl, e.what());
      server->Shutdown(std::chrono::system_clock::now());
      return 1;
    }
  }

  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("received {}: draining for up to {} ms", sig == SIGTERM ? "SIGTERM" : "SIGINT",
               cfg.server.shutdown_grace_ms);
  server->GetHealthCheckService()->SetServingStatus(false);
  server->GetHealthCheckService()->SetServingStatus(kvserve::v1::Inference::service_full_name(), false);
  state.begin_shutdown();  // both front ends: new work refused, /health 503
  engine->shutdown(kvserve::Engine::Shutdown::kDrain, std::chrono::milliseconds(cfg.server.shutdown_grace_ms));
  // Every stream has its final event now; give the last writes a moment to reach the clients.
  // (Shutdown's own deadline would also wait for idle client connections to go away.)
  state.wait_streams_done(std::chrono::seconds(5));
  server->Shutdown(std::chrono::system_clock::now());
  if (http) http->stop();
  const kvserve::EngineStats s = engine->stats();
  spdlog::info("stopped: {} requests finished, {} prompt and {} generated tokens", s.requests_finished_total,
               s.prompt_tokens_total, s.generation_tokens_total);
  return 0;
}
