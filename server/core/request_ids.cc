#include "core/request_ids.h"

#include <sys/random.h>

#include <cstdio>
#include <stdexcept>

namespace kvserve {

std::string check_request_id(std::string_view id, std::string_view field) {
  const std::string f(field);
  if (id.empty()) return f + ": empty";
  if (id.size() > kMaxRequestIdBytes)
    return f + ": " + std::to_string(id.size()) + " bytes; at most " + std::to_string(kMaxRequestIdBytes);
  for (size_t i = 0; i < id.size(); ++i) {
    const auto c = static_cast<unsigned char>(id[i]);
    if (c < 0x20 || c > 0x7e) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "0x%02x", c);
      return f + ": byte " + std::to_string(i) + " is " + hex + "; only printable ASCII (0x20-0x7e) is allowed";
    }
  }
  return {};
}

std::string random_request_id() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) throw std::runtime_error("getrandom failed");
    got += static_cast<size_t>(n);
  }
  std::string id = "kvs-";
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

// Ids are printable ASCII, so a newline cannot occur in either part.
std::string RequestRegistry::key(const std::string& tenant, const std::string& id) { return tenant + '\n' + id; }

bool RequestRegistry::add(const std::string& tenant, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.emplace(key(tenant, id), 0).second;
}

void RequestRegistry::set_engine_id(const std::string& tenant, const std::string& id, uint64_t engine_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(key(tenant, id));
  if (it != live_.end()) it->second = engine_id;
}

std::optional<uint64_t> RequestRegistry::find(const std::string& tenant, const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(key(tenant, id));
  if (it == live_.end()) return std::nullopt;
  return it->second;
}

void RequestRegistry::remove(const std::string& tenant, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(key(tenant, id));
}

size_t RequestRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_.size();
}

}  // namespace kvserve
