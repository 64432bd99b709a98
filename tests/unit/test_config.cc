// Config loading: every field's type and range checked, unknown fields refused, and the error
// names the field; overrides from the command line apply before validation.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>

#include "runtime/config.h"
#include "server_options.h"

namespace kvserve {
namespace {

using nlohmann::json;

std::string error_of(const json& config) {
  try {
    serve_config_from_json(config);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(Config, DefaultsAndOverrides) {
  json c = json::parse(R"({"model": {"path": "m.gguf"}, "_comment": "ignored"})");
  apply_overrides(c, {"cache.block_size=32", "server.listen=\"0.0.0.0:7000\"", "cache.enable_prefix_caching=false"});
  ServeConfig s = serve_config_from_json(c);
  EXPECT_EQ(s.engine.model.path, "m.gguf");
  EXPECT_EQ(s.engine.cache.block_size, 32);
  EXPECT_FALSE(s.engine.cache.enable_prefix_caching);
  EXPECT_EQ(s.engine.scheduler.max_num_seqs, 64);
  EXPECT_EQ(s.server.listen, "0.0.0.0:7000");
  EXPECT_EQ(s.server.shutdown_grace_ms, 30000);
  // The OpenAI HTTP API is on unless turned off, on vLLM's port, with the limits that keep one
  // client from holding it.
  EXPECT_EQ(s.server.http_listen, "127.0.0.1:8000");
  EXPECT_EQ(s.server.http_header_timeout_ms, 10000);
  EXPECT_EQ(s.server.http_max_connections_per_client, 512);
  apply_overrides(c, {"server.http_listen=\"\"", "server.http_workers=4"});
  EXPECT_EQ(serve_config_from_json(c).server.http_listen, "");
  EXPECT_EQ(serve_config_from_json(c).server.http_workers, 4);
}

TEST(Config, ErrorsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"model": {}})", "model.path"},
      {R"({"model": {"path": 3}})", "model.path: expected a string"},
      {R"({"model": {"path": "m", "num_threads": "two"}})", "model.num_threads: expected an integer"},
      {R"({"model": {"path": "m"}, "cache": {"block_size": 0}})", "cache.block_size"},
      {R"({"model": {"path": "m"}, "cache": {"block_size": 1.5}})", "cache.block_size: expected an integer"},
      {R"({"model": {"path": "m"}, "cache": {"blocksize": 16}})", "cache.blocksize: unknown field"},
      {R"({"model": {"path": "m"}, "cache": {"enable_prefix_caching": 1}})", "cache.enable_prefix_caching"},
      {R"({"model": {"path": "m"}, "cache": {"num_blocks": 99999999999}})", "cache.num_blocks"},
      {R"({"model": {"path": "m", "keep_bf16": 3}})", "model.keep_bf16"},
      {R"({"model": {"path": "m"}, "cache": {"dtype": "int8"}})", "cache.dtype: expected \"f32\", \"f16\" or \"q8_0\""},
      {R"({"model": {"path": "m"}, "server": {"http_header_timeout_ms": 5}})", "server.http_header_timeout_ms: must be between"},
      {R"({"model": {"path": "m"}, "server": {"http_workers": "2"}})", "server.http_workers: expected an integer"},
      {R"({"model": {"path": "m"}, "server": {"http_max_connections_per_client": 5000}})",
       "server.http_max_connections_per_client: must be between 1 and 1024"},
      {R"({"model": {"path": "m"}, "scheduler": {"max_num_seqs": -1}})", "scheduler.max_num_seqs"},
      {R"({"model": {"path": "m"}, "scheduler": {"max_num_seqs": 64, "max_num_batched_tokens": 8}})",
       "scheduler.max_num_batched_tokens"},
      {R"({"model": {"path": "m"}, "scheduler": {"max_waiting": 0}})", "scheduler.max_waiting"},
      {R"({"model": {"path": "m"}, "server": {"listen": "nohostport"}})", "server.listen"},
      {R"({"model": {"path": "m"}, "server": {"shutdown_grace_ms": -5}})", "server.shutdown_grace_ms"},
      {R"({"model": {"path": "m"}, "server": {"max_message_bytes": 10}})", "server.max_message_bytes"},
      {R"({"model": {"path": "m"}, "server": {"log_level": "loud"}})", "server.log_level"},
      {R"({"model": {"path": "m"}, "server": {"inspect_max_tokens": 1}})", "server.inspect_max_tokens"},
      {R"({"model": {"path": "m"}, "server": {"inspect_max_tokens": "big"}})", "server.inspect_max_tokens: expected an integer"},
      {R"({"model": {"path": "m"}, "server": {"port": 1}})", "server.port: unknown field"},
      {R"({"model": {"path": "m"}, "servr": {}})", "servr: unknown config section"},
      {R"({"model": "m"})", "model: expected an object"},
  };
  for (const auto& [text, fragment] : cases) {
    const std::string err = error_of(json::parse(text));
    EXPECT_NE(err.find(fragment), std::string::npos) << text << " -> '" << err << "'";
  }
  json c = json::object();
  EXPECT_THROW(apply_overrides(c, {"no_dot=1"}), ConfigError);
}

}  // namespace
}  // namespace kvserve

namespace kvserve {
namespace {

// Every config the project ships loads and validates.
TEST(Config, ShippedConfigsAreValid) {
  for (const char* name : {"default.json", "throughput.json", "long-context.json"}) {
    std::ifstream in(std::string(KVSERVE_SOURCE_DIR) + "/configs/" + name);
    ASSERT_TRUE(in) << name;
    EXPECT_EQ(error_of(json::parse(in)), "") << name;
  }
  std::ifstream in(std::string(KVSERVE_SOURCE_DIR) + "/configs/throughput.json");
  EXPECT_EQ(serve_config_from_json(json::parse(in)).engine.cache.dtype, "f16");
}

}  // namespace
}  // namespace kvserve

namespace kvserve {
namespace {

TEST(Config, ByteSizesTakeUnits) {
  const auto bytes = [](const json& v) {
    return serve_config_from_json({{"model", {{"path", "m"}}}, {"cache", {{"memory_bytes", v}}}})
        .engine.cache.memory_bytes;
  };
  EXPECT_EQ(bytes(1073741824), int64_t{1} << 30);
  EXPECT_EQ(bytes("2GiB"), int64_t{2} << 30);
  EXPECT_EQ(bytes("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(bytes("1.5 GiB"), int64_t{3} << 29);
  EXPECT_EQ(bytes("3GB"), int64_t{3000000000});
  EXPECT_EQ(bytes("4096"), 4096);
  for (const char* bad : {"2 gigs", "GiB", "-1GiB", "1e30GiB", ""}) {
    try {
      bytes(bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("cache.memory_bytes"), std::string::npos) << e.what();
    }
  }
}

TEST(Config, ListenAddressesAreHostAndAPortInRange) {
  for (const char* ok : {"127.0.0.1:50051", "0.0.0.0:0", "[::1]:65535", "localhost:1"}) EXPECT_NO_THROW(check_host_port("f", ok)) << ok;
  for (const char* bad : {"127.0.0.1:99999", "127.0.0.1:", ":50051", "127.0.0.1", "::1:80", "host:80a", "h:123456"}) {
    try {
      check_host_port("server.listen", bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("server.listen"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
  EXPECT_NE(error_of(json::parse(R"({"model": {"path": "m"}, "server": {"metrics_listen": "127.0.0.1:70000"}})"))
                .find("server.metrics_listen"),
            std::string::npos);
}

// Relative paths in a config file are relative to the file's folder; absolute ones stay.
TEST(Config, RelativePathsResolveAgainstTheConfigFile) {
  json c = json::parse(R"({"model": {"path": "../models/m.gguf"},
                           "server": {"auth_token_file": "tokens.txt", "tls_cert_file": "/etc/cert.pem"}})");
  resolve_config_paths(c, "/srv/kvserve/configs/prod.json");
  EXPECT_EQ(c["model"]["path"], "/srv/kvserve/models/m.gguf");
  EXPECT_EQ(c["server"]["auth_token_file"], "/srv/kvserve/configs/tokens.txt");
  EXPECT_EQ(c["server"]["tls_cert_file"], "/etc/cert.pem");
}

// The shipped configs keep the metrics endpoint, and each sizes its KV cache for what its
// comment claims on the default model (13,824 bytes per token in f32, half in f16).
TEST(Config, ShippedConfigsServeMetricsAndFitWhatTheyClaim) {
  const auto load = [](const char* name) {
    std::ifstream in(std::string(KVSERVE_SOURCE_DIR) + "/configs/" + name);
    return serve_config_from_json(json::parse(in));
  };
  for (const char* name : {"default.json", "throughput.json", "long-context.json"}) {
    EXPECT_FALSE(load(name).server.metrics_listen.empty()) << name;
    EXPECT_FALSE(load(name).server.http_listen.empty()) << name;
  }
  const ServeConfig t = load("throughput.json"), l = load("long-context.json");
  const double f16 = 6912, f32 = 13824;
  const double t_fit = t.engine.cache.memory_bytes / (f16 * t.engine.scheduler.max_model_len);
  const double l_fit = l.engine.cache.memory_bytes / (f32 * 2048);
  EXPECT_GE(t_fit, t.engine.scheduler.max_num_seqs);
  EXPECT_LE(t_fit, 1.5 * t.engine.scheduler.max_num_seqs);
  EXPECT_GE(l_fit, l.engine.scheduler.max_num_seqs);
  EXPECT_LE(l_fit, 1.5 * l.engine.scheduler.max_num_seqs);
}

}  // namespace
}  // namespace kvserve
