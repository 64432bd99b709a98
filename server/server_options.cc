#include "server_options.h"

#include <filesystem>
#include <map>
#include <set>

namespace kvserve {

using nlohmann::json;

void apply_overrides(json& config, const std::vector<std::string>& overrides) {
  for (const auto& o : overrides) {
    const size_t eq = o.find('=');
    const size_t dot = o.find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq)
      throw ConfigError("override '" + o + "': expected section.field=value");
    const std::string section = o.substr(0, dot), field = o.substr(dot + 1, eq - dot - 1);
    const std::string value = o.substr(eq + 1);
    json v;
    try {
      v = json::parse(value);
    } catch (const json::parse_error&) {
      v = value;
    }
    if (!config.contains(section)) config[section] = json::object();
    config[section][field] = v;
  }
}

void check_host_port(const std::string& field, const std::string& value) {
  const size_t colon = value.rfind(':');
  const auto fail = [&](const std::string& why) {
    throw ConfigError(field + ": expected HOST:PORT (" + why + "), got '" + value + "'");
  };
  if (colon == std::string::npos) fail("no port");
  const std::string host = value.substr(0, colon), port = value.substr(colon + 1);
  if (host.empty()) fail("no host; 0.0.0.0 listens on every interface");
  if (host.find(':') != std::string::npos && (host.front() != '[' || host.back() != ']'))
    fail("an IPv6 host goes in brackets");
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535)
    fail("the port must be a number from 0 to 65535");
}

void resolve_config_paths(json& config, const std::string& config_file) {
  const std::filesystem::path base = std::filesystem::path(config_file).parent_path();
  static const std::vector<std::pair<const char*, const char*>> fields = {
      {"model", "path"}, {"server", "tls_cert_file"}, {"server", "tls_key_file"},
      {"server", "auth_token_file"}, {"server", "port_file"}};
  for (const auto& [section, field] : fields) {
    if (!config.is_object() || !config.contains(section) || !config[section].is_object()) continue;
    json& s = config[section];
    if (!s.contains(field) || !s[field].is_string()) continue;
    const std::string v = s[field].get<std::string>();
    if (!v.empty() && std::filesystem::path(v).is_relative()) s[field] = (base / v).lexically_normal().string();
  }
}

namespace {

// The HTTP API's integer limits: name, range, and where each goes.
struct HttpLimit {
  int64_t lo, hi;
  void (*set)(ServerOptions&, int64_t);
};

const std::map<std::string, HttpLimit>& http_limits() {
  static const std::map<std::string, HttpLimit> limits = {
      {"http_header_timeout_ms", {100, 3600000, [](ServerOptions& o, int64_t x) { o.http_header_timeout_ms = x; }}},
      {"http_body_timeout_ms", {100, 3600000, [](ServerOptions& o, int64_t x) { o.http_body_timeout_ms = x; }}},
      {"http_idle_timeout_s", {1, 86400, [](ServerOptions& o, int64_t x) { o.http_idle_timeout_s = static_cast<int32_t>(x); }}},
      {"http_max_connections_per_client",
       {1, 1024, [](ServerOptions& o, int64_t x) { o.http_max_connections_per_client = static_cast<int32_t>(x); }}},
      {"http_workers", {1, 64, [](ServerOptions& o, int64_t x) { o.http_workers = static_cast<int32_t>(x); }}},
  };
  return limits;
}

}  // namespace

ServeConfig serve_config_from_json(const json& config) {
  ServeConfig c;
  c.engine = engine_options_from_json(config);
  validate(c.engine);
  for (auto it = config.begin(); it != config.end(); ++it) {
    static const std::set<std::string> known = {"model", "cache", "scheduler", "speculative", "server"};
    if (!known.count(it.key()) && it.key()[0] != '_') throw ConfigError(it.key() + ": unknown config section");
  }
  if (!config.contains("server")) return c;
  const json& s = config["server"];
  if (!s.is_object()) throw ConfigError("server: expected an object");
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    const json& v = it.value();
    if (k[0] == '_') continue;  // a comment
    const std::string field = "server." + k;
    static const std::map<std::string, std::string ServerOptions::*> strings = {
        {"listen", &ServerOptions::listen},           {"log_level", &ServerOptions::log_level},
        {"port_file", &ServerOptions::port_file},     {"tls_cert_file", &ServerOptions::tls_cert_file},
        {"tls_key_file", &ServerOptions::tls_key_file}, {"auth_token_file", &ServerOptions::auth_token_file},
        {"metrics_listen", &ServerOptions::metrics_listen}, {"reflection", &ServerOptions::reflection},
        {"http_listen", &ServerOptions::http_listen}, {"kv_events_endpoint", &ServerOptions::kv_events_endpoint},
        {"kv_events_topic", &ServerOptions::kv_events_topic}};
    if (auto it = strings.find(k); it != strings.end()) {
      if (!v.is_string()) throw ConfigError(field + ": expected a string, got " + v.dump());
      c.server.*(it->second) = v.get<std::string>();
    } else if (k == "metrics_auth") {
      if (!v.is_boolean()) throw ConfigError(field + ": expected true or false, got " + v.dump());
      c.server.metrics_auth = v.get<bool>();
    } else if (k == "shutdown_grace_ms" || k == "max_message_bytes" || k == "inspect_max_tokens" ||
               k == "max_inspect_calls") {
      if (!v.is_number_integer()) throw ConfigError(field + ": expected an integer, got " + v.dump());
      const int64_t x = v.get<int64_t>();
      if (k == "shutdown_grace_ms") {
        if (x < 0) throw ConfigError(field + ": must be >= 0");
        c.server.shutdown_grace_ms = x;
      } else if (k == "max_inspect_calls") {
        if (x < 1 || x > 1024) throw ConfigError(field + ": must be between 1 and 1024");
        c.server.max_inspect_calls = static_cast<int32_t>(x);
      } else if (k == "inspect_max_tokens") {
        if (x < 2 || x > 4096) throw ConfigError(field + ": must be between 2 and 4096");
        c.server.inspect_max_tokens = static_cast<int32_t>(x);
      } else {
        if (x < 1024 || x > (int64_t{1} << 30)) throw ConfigError(field + ": must be between 1 KiB and 1 GiB");
        c.server.max_message_bytes = static_cast<int32_t>(x);
      }
    } else if (auto lim = http_limits().find(k); lim != http_limits().end()) {
      if (!v.is_number_integer()) throw ConfigError(field + ": expected an integer, got " + v.dump());
      const int64_t x = v.get<int64_t>();
      const HttpLimit& l = lim->second;
      if (x < l.lo || x > l.hi)
        throw ConfigError(field + ": must be between " + std::to_string(l.lo) + " and " + std::to_string(l.hi));
      l.set(c.server, x);
    } else {
      throw ConfigError(field + ": unknown field");
    }
  }
  if (c.server.tls_cert_file.empty() != c.server.tls_key_file.empty())
    throw ConfigError("server.tls_cert_file, server.tls_key_file: give both or neither");
  check_host_port("server.listen", c.server.listen);
  if (!c.server.metrics_listen.empty()) check_host_port("server.metrics_listen", c.server.metrics_listen);
  if (!c.server.http_listen.empty()) check_host_port("server.http_listen", c.server.http_listen);
  if (const std::string& e = c.server.kv_events_endpoint;
      !e.empty() && e.rfind("tcp://", 0) != 0 && e.rfind("ipc://", 0) != 0 && e.rfind("inproc://", 0) != 0)
    throw ConfigError("server.kv_events_endpoint: expected a ZeroMQ address (tcp://HOST:PORT or ipc://PATH), got '" + e + "'");
  if (c.server.reflection != "auto" && c.server.reflection != "on" && c.server.reflection != "off")
    throw ConfigError("server.reflection: expected \"auto\", \"on\" or \"off\", got '" + c.server.reflection + "'");
  static const std::set<std::string> levels = {"trace", "debug", "info", "warn", "error"};
  if (!levels.count(c.server.log_level))
    throw ConfigError("server.log_level: expected one of trace, debug, info, warn, error");
  return c;
}

}  // namespace kvserve
