#include "runtime/config.h"

#include "kernels/cpu_features.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>

namespace kvserve {
namespace {

using nlohmann::json;

// Keys starting with '_' are comments and ignored everywhere.

// Reads section.key into `out` if present, checking its JSON type.
template <typename T>
void read(const json& section, const std::string& name, const char* key, T& out,
          std::set<std::string>& seen) {
  seen.insert(key);
  auto it = section.find(key);
  if (it == section.end()) return;
  const std::string field = name + "." + key;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) throw ConfigError(field + ": expected a string, got " + it->dump());
    out = it->get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!it->is_boolean()) throw ConfigError(field + ": expected true or false, got " + it->dump());
    out = it->get<bool>();
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!it->is_number()) throw ConfigError(field + ": expected a number, got " + it->dump());
    out = it->get<T>();
  } else {
    if (!it->is_number_integer())
      throw ConfigError(field + ": expected an integer, got " + it->dump());
    if (it->is_number_unsigned() ? it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())
                                 : (it->get<int64_t>() < std::numeric_limits<T>::min() ||
                                    it->get<int64_t>() > std::numeric_limits<T>::max()))
      throw ConfigError(field + ": " + it->dump() + " is out of range");
    out = static_cast<T>(it->get<int64_t>());
  }
}

// A byte count: an integer, or a string with a unit ("512MiB", "2GiB", "1.5 GB"; KiB/MiB/GiB/TiB
// are powers of 1024, kB/MB/GB/TB of 1000, "B" or none is bytes).
void read_bytes(const json& section, const std::string& name, const char* key, int64_t& out,
                std::set<std::string>& seen) {
  seen.insert(key);
  auto it = section.find(key);
  if (it == section.end()) return;
  if (!it->is_string()) {
    read(section, name, key, out, seen);
    return;
  }
  const std::string field = name + "." + key, text = it->get<std::string>();
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string unit = text.substr(used);
  unit.erase(0, unit.find_first_not_of(' '));
  static const std::vector<std::pair<std::string, double>> units = {
      {"", 1.0},      {"B", 1.0},      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0},
      {"TiB", 1099511627776.0}, {"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}};
  const auto u = std::find_if(units.begin(), units.end(), [&](const auto& p) { return p.first == unit; });
  if (used == 0 || u == units.end() || !(value >= 0) || value * u->second > 9.2e18)
    throw ConfigError(field + ": expected bytes as an integer or a size such as \"512MiB\" or \"2GiB\", got " +
                      it->dump());
  out = static_cast<int64_t>(value * u->second);
}

const json& section(const json& config, const std::string& name) {
  static const json empty = json::object();
  auto it = config.find(name);
  if (it == config.end()) return empty;
  if (!it->is_object()) throw ConfigError(name + ": expected an object");
  return *it;
}

void reject_unknown(const json& s, const std::string& name, const std::set<std::string>& seen) {
  for (auto it = s.begin(); it != s.end(); ++it)
    if (!seen.count(it.key()) && it.key()[0] != '_') throw ConfigError(name + "." + it.key() + ": unknown field");
}

}  // namespace

EngineOptions engine_options_from_json(const json& config) {
  if (!config.is_object()) throw ConfigError("config: expected a JSON object");
  EngineOptions o;
  std::set<std::string> seen;
  const json& m = section(config, "model");
  read(m, "model", "path", o.model.path, seen);
  read(m, "model", "num_threads", o.model.num_threads, seen);
  read(m, "model", "keep_bf16", o.model.keep_bf16, seen);
  read(m, "model", "int8_activations", o.model.int8_activations, seen);
  read(m, "model", "repack_weights", o.model.repack_weights, seen);
  read(m, "model", "kernels", o.model.kernels, seen);
  read(m, "model", "chat_template_file", o.model.chat_template_file, seen);
  reject_unknown(m, "model", seen);

  seen.clear();
  const json& c = section(config, "cache");
  read(c, "cache", "block_size", o.cache.block_size, seen);
  read(c, "cache", "num_blocks", o.cache.num_blocks, seen);
  read_bytes(c, "cache", "memory_bytes", o.cache.memory_bytes, seen);
  read(c, "cache", "enable_prefix_caching", o.cache.enable_prefix_caching, seen);
  read(c, "cache", "release_windowed_blocks", o.cache.release_windowed_blocks, seen);
  read(c, "cache", "dtype", o.cache.dtype, seen);
  reject_unknown(c, "cache", seen);

  seen.clear();
  const json& s = section(config, "scheduler");
  read(s, "scheduler", "max_num_seqs", o.scheduler.max_num_seqs, seen);
  read(s, "scheduler", "max_num_batched_tokens", o.scheduler.max_num_batched_tokens, seen);
  read(s, "scheduler", "max_model_len", o.scheduler.max_model_len, seen);
  read(s, "scheduler", "max_waiting", o.scheduler.max_waiting, seen);
  read(s, "scheduler", "background_tokens_per_step", o.scheduler.background_tokens_per_step, seen);
  read(s, "scheduler", "max_scored_tokens_per_step", o.scheduler.max_scored_tokens_per_step, seen);
  reject_unknown(s, "scheduler", seen);

  seen.clear();
  const json& sp = section(config, "speculative");
  read(sp, "speculative", "method", o.speculative.method, seen);
  read(sp, "speculative", "num_tokens", o.speculative.num_tokens, seen);
  read(sp, "speculative", "ngram_min", o.speculative.ngram_min, seen);
  read(sp, "speculative", "ngram_max", o.speculative.ngram_max, seen);
  read(sp, "speculative", "max_batch", o.speculative.max_batch, seen);
  read(sp, "speculative", "adaptive", o.speculative.adaptive, seen);
  read(sp, "speculative", "draft_model", o.speculative.draft_model, seen);
  read(sp, "speculative", "draft_cache_share", o.speculative.draft_cache_share, seen);
  reject_unknown(sp, "speculative", seen);
  return o;
}

void validate(const EngineOptions& o) {
  if (o.model.path.empty()) throw ConfigError("model.path: required (a GGUF file)");
  if (o.model.num_threads < 0) throw ConfigError("model.num_threads: must be >= 0");
  if (o.model.kernels != "auto" && !parse_level(o.model.kernels))
    throw ConfigError("model.kernels: expected \"auto\", \"avx512\", \"avx2_vnni\", \"avx2\" or \"scalar\", got '" + o.model.kernels + "'");
  if (o.cache.block_size < 1 || o.cache.block_size > 1024)
    throw ConfigError("cache.block_size: must be between 1 and 1024");
  if (o.cache.num_blocks < 0) throw ConfigError("cache.num_blocks: must be >= 0");
  if (o.cache.dtype != "f32" && o.cache.dtype != "f16" && o.cache.dtype != "q8_0")
    throw ConfigError("cache.dtype: expected \"f32\", \"f16\" or \"q8_0\", got \"" + o.cache.dtype + "\"");
  if (o.cache.num_blocks == 0 && o.cache.memory_bytes <= 0)
    throw ConfigError("cache.memory_bytes: must be positive when cache.num_blocks is 0");
  const SpeculativeOptions& sp = o.speculative;
  if (sp.method != "off" && sp.method != "ngram" && sp.method != "draft")
    throw ConfigError("speculative.method: expected \"off\", \"ngram\" or \"draft\", got \"" + sp.method + "\"");
  if (sp.method == "draft" && sp.draft_model.empty())
    throw ConfigError("speculative.draft_model: required with method \"draft\" (a GGUF file with the model's vocabulary)");
  if (sp.method != "draft" && !sp.draft_model.empty())
    throw ConfigError("speculative.draft_model: set, but speculative.method is \"" + sp.method + "\", not \"draft\"");
  if (!(sp.draft_cache_share > 0.0 && sp.draft_cache_share <= 0.5))
    throw ConfigError("speculative.draft_cache_share: must be above 0 and at most 0.5");
  if (sp.num_tokens < 1 || sp.num_tokens > 64) throw ConfigError("speculative.num_tokens: must be between 1 and 64");
  if (sp.ngram_min < 1) throw ConfigError("speculative.ngram_min: must be >= 1");
  if (sp.ngram_max < sp.ngram_min) throw ConfigError("speculative.ngram_max: must be >= speculative.ngram_min");
  if (sp.max_batch < 1) throw ConfigError("speculative.max_batch: must be >= 1");
  if (o.scheduler.max_num_seqs < 1) throw ConfigError("scheduler.max_num_seqs: must be >= 1");
  if (o.scheduler.max_num_batched_tokens < 1)
    throw ConfigError("scheduler.max_num_batched_tokens: must be >= 1");
  if (o.scheduler.max_num_batched_tokens < o.scheduler.max_num_seqs)
    throw ConfigError("scheduler.max_num_batched_tokens: must be >= scheduler.max_num_seqs, so that "
                      "every running sequence can decode in one step");
  if (o.scheduler.max_model_len < 0) throw ConfigError("scheduler.max_model_len: must be >= 0");
  if (o.scheduler.max_waiting < 1) throw ConfigError("scheduler.max_waiting: must be >= 1");
  if (o.scheduler.max_scored_tokens_per_step < 1)
    throw ConfigError("scheduler.max_scored_tokens_per_step: must be >= 1");
  if (o.scheduler.background_tokens_per_step < 0)
    throw ConfigError("scheduler.background_tokens_per_step: must be >= 0 (0 = no limit)");
}

json load_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError(path + ": cannot open config file");
  try {
    return json::parse(in, nullptr, true, /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    throw ConfigError(path + ": invalid JSON: " + e.what());
  }
}

}  // namespace kvserve
