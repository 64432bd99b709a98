// HOST:PORT to the socket address libmicrohttpd binds (IPv4, IPv6 in brackets, or a name), for
// every libmicrohttpd daemon of the server (/metrics and the HTTP API).
#pragma once

#include <sys/socket.h>

#include <string>

namespace kvserve {

struct BindAddress {
  sockaddr_storage addr{};
  bool v6 = false;
};

// Throws std::runtime_error naming "host:port" if it does not resolve.
BindAddress resolve_bind_address(const std::string& host, int port);

}  // namespace kvserve
