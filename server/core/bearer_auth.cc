#include "core/bearer_auth.h"

#include <cctype>
#include <fstream>

#include "runtime/config.h"

namespace kvserve {
namespace {

// Compares without an early exit, so response time does not reveal how much of a token matched.
bool same(const std::string& a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

std::vector<std::string> load_bearer_tokens(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw ConfigError("server.auth_token_file: cannot read " + path);
  std::vector<std::string> tokens;
  for (std::string line; std::getline(in, line);) {
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.pop_back();
    if (!line.empty() && line[0] != '#') tokens.push_back(line);
  }
  if (tokens.empty()) throw ConfigError("server.auth_token_file: no tokens in " + path);
  return tokens;
}

std::optional<std::string> BearerAuth::tenant(std::optional<std::string_view> authorization) const {
  if (tokens_.empty()) return std::string();
  if (!authorization) return std::nullopt;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization->substr(0, kBearer.size()) != kBearer) return std::nullopt;
  const std::string_view presented = authorization->substr(kBearer.size());
  std::optional<std::string> found;
  // Every token is compared, so the time taken does not tell which one matched.
  for (size_t i = 0; i < tokens_.size(); ++i)
    if (same(tokens_[i], presented) && !found) found = "token-" + std::to_string(i + 1);
  return found;
}

}  // namespace kvserve
