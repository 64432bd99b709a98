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

// A listening socket for a libmicrohttpd daemon (MHD_OPTION_LISTEN_SOCKET), bound here rather
// than by the library so the options are ours: SO_REUSEADDR, so that a restart binds at once
// over the last run's connections in TIME_WAIT, and never SO_REUSEPORT, so that a second live
// server on the port is refused. *bound_port: the port bound (for port 0). Throws
// std::runtime_error with the reason.
int listen_socket(const BindAddress& bind, const std::string& where, int* bound_port);

}  // namespace kvserve
