#include "http/mhd_address.h"

#include <netdb.h>

#include <cstring>
#include <stdexcept>

namespace kvserve {

BindAddress resolve_bind_address(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string bare = host.size() > 2 && host.front() == '[' && host.back() == ']' ? host.substr(1, host.size() - 2)
                                                                                       : host;
  if (getaddrinfo(bare.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found)
    throw std::runtime_error("cannot resolve " + host + ":" + std::to_string(port));
  BindAddress b;
  std::memcpy(&b.addr, found->ai_addr, found->ai_addrlen);
  b.v6 = found->ai_family == AF_INET6;
  freeaddrinfo(found);
  return b;
}

}  // namespace kvserve
