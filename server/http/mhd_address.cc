#include "http/mhd_address.h"

#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>

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

int listen_socket(const BindAddress& bind, const std::string& where, int* bound_port) {
  const int fd = socket(bind.v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw std::runtime_error("cannot listen on " + where + ": socket: " + std::strerror(errno));
  const int one = 1;
  const socklen_t len = bind.v6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
      ::bind(fd, reinterpret_cast<const sockaddr*>(&bind.addr), len) != 0 || listen(fd, SOMAXCONN) != 0) {
    const int err = errno;
    close(fd);
    throw std::runtime_error("cannot listen on " + where + ": " + std::strerror(err) +
                             (err == EADDRINUSE ? " (another server holds the port)" : ""));
  }
  sockaddr_storage actual{};
  socklen_t actual_len = sizeof(actual);
  getsockname(fd, reinterpret_cast<sockaddr*>(&actual), &actual_len);
  *bound_port = ntohs(actual.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&actual)->sin6_port
                                                   : reinterpret_cast<sockaddr_in*>(&actual)->sin_port);
  return fd;
}

}  // namespace kvserve
