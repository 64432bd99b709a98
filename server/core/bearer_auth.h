// Bearer-token authentication shared by every front end: the tokens come from
// server.auth_token_file, and a caller is the tenant of the token it presents. Tenants own their
// requests (see request_ids.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvserve {

// Reads one token per line ('#' comments and blank lines skipped, trailing space trimmed).
// Throws ConfigError naming server.auth_token_file if it cannot be read or holds no token.
std::vector<std::string> load_bearer_tokens(const std::string& path);

class BearerAuth {
 public:
  explicit BearerAuth(std::vector<std::string> tokens = {}) : tokens_(std::move(tokens)) {}

  bool enabled() const { return !tokens_.empty(); }
  size_t num_tokens() const { return tokens_.size(); }
  // The tenant of an "authorization" header value ("Bearer <token>"): "token-N" for the N-th
  // token of the file; "" for everyone when authentication is off; nothing when the header is
  // missing or names no configured token.
  std::optional<std::string> tenant(std::optional<std::string_view> authorization) const;

  static constexpr std::string_view kUnauthenticatedMessage = "authorization: a valid bearer token is required";

 private:
  std::vector<std::string> tokens_;
};

}  // namespace kvserve
