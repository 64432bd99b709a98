// Request ids: what a client may send (checked at the door, before the id reaches metadata or a
// log line), server-assigned ids nobody can guess, and the registry of live ids. Each id belongs
// to the tenant (bearer token) that created it: another tenant's Abort answers as if it did not
// exist, and two tenants may use the same id without colliding.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace kvserve {

constexpr size_t kMaxRequestIdBytes = 128;

// Empty if `id` is 1..128 bytes of printable ASCII (0x20..0x7e); else a message naming
// `field`. Such ids are legal gRPC and HTTP header values as they are.
std::string check_request_id(std::string_view id, std::string_view field = "request_id");

// "kvs-" and 32 hex digits of the kernel's random source: 128 bits, not guessable.
std::string random_request_id();

class RequestRegistry {
 public:
  // Registers a live id for `tenant`; false if that tenant already has it live.
  bool add(const std::string& tenant, const std::string& id);
  // The engine id of a live request, once known (0 until set_engine_id).
  void set_engine_id(const std::string& tenant, const std::string& id, uint64_t engine_id);
  // The engine id, or nothing when `tenant` has no live request of that id.
  std::optional<uint64_t> find(const std::string& tenant, const std::string& id) const;
  void remove(const std::string& tenant, const std::string& id);
  size_t size() const;

 private:
  static std::string key(const std::string& tenant, const std::string& id);

  mutable std::mutex mu_;
  std::unordered_map<std::string, uint64_t> live_;  // tenant '\n' id -> engine id
};

}  // namespace kvserve
