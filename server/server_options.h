// The server's own options (the "server" section of the config), and the whole config as the
// server reads it: JSON file, then command-line overrides, then validation.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "runtime/config.h"

namespace kvserve {

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";  // gRPC address; loopback unless configured otherwise
  int64_t shutdown_grace_ms = 30000;       // on SIGTERM: time for in-flight requests to finish
  int32_t max_message_bytes = 4 << 20;     // largest request message accepted
  int32_t inspect_max_tokens = 256;        // longest prompt InspectAttention and HeadImportance take
  int32_t max_inspect_calls = 4;           // inspection calls running at once; more get RESOURCE_EXHAUSTED
  std::string log_level = "info";          // trace, debug, info, warn, error
  std::string port_file;                   // if set, the bound port is written here (tests)
  std::string tls_cert_file;               // PEM certificate chain; with tls_key_file enables TLS
  std::string tls_key_file;                // PEM private key of that certificate
  std::string metrics_listen;              // HOST:PORT of the Prometheus /metrics endpoint; "" = off
  std::string http_listen = "127.0.0.1:8000";  // HOST:PORT of the OpenAI-compatible HTTP API (vLLM's port); "" = off
  bool metrics_auth = false;               // with auth_token_file: /metrics needs a bearer token too
  // HTTP API limits against clients that hold connections without finishing a request:
  int64_t http_header_timeout_ms = 10000;  // connection start (or the last reply) to complete headers;
                                           // so also how long an idle keep-alive connection stays
  int64_t http_body_timeout_ms = 30000;    // complete headers to complete body
  int32_t http_idle_timeout_s = 60;        // no progress sending a reply its client does not read
  int32_t http_max_connections_per_client = 512;  // open connections from one client address
  int32_t http_workers = 2;                // threads that parse and tokenize request bodies
  // gRPC server reflection: "auto" (on without auth_token_file, off with it: gRPC's reflection
  // service cannot check a bearer token, so it would describe the API to anyone), "on", "off".
  std::string reflection = "auto";
  std::string auth_token_file;             // if set: bearer tokens, one per line, required on every
                                           // kvserve.v1 call ("authorization: Bearer <token>")
  // ZeroMQ address where the prefix cache's changes are published as vLLM's KV events (for
  // llm-d's precise prefix routing): "tcp://*:5557", "tcp://127.0.0.1:*" (any free port),
  // "ipc:///path"; "" = off.
  std::string kv_events_endpoint;
  std::string kv_events_topic;             // the first part of every event message ("" as vLLM's default)
};

struct ServeConfig {
  EngineOptions engine;
  ServerOptions server;
};

// Applies "section.field=value" overrides to a parsed config; value is read as JSON when it
// parses (numbers, true/false), as a string otherwise.
void apply_overrides(nlohmann::json& config, const std::vector<std::string>& overrides);
// Reads and validates everything; ConfigError names the field.
ServeConfig serve_config_from_json(const nlohmann::json& config);
// Makes the relative file paths of a config read from a file (model.path, the server's TLS,
// token and port files) relative to that file's folder, as a config is written next to what it
// names; paths given on the command line stay relative to the working directory.
void resolve_config_paths(nlohmann::json& config, const std::string& config_file);
// ConfigError naming `field` unless value is HOST:PORT with a port 0..65535 ("[::1]:50051" for IPv6).
void check_host_port(const std::string& field, const std::string& value);

}  // namespace kvserve
