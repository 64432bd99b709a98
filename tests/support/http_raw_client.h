// A plain-socket HTTP/1.1 client for tests that need what a library client will not do: any
// bytes in a body, a chosen source address (127.0.0.2 is loopback too, and another "client
// address" to the server), half-sent requests, half-closed sockets.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

namespace kvserve::testing {

// A connected socket from `source` (an IPv4 loopback address) to 127.0.0.1:port; -1 on failure.
inline int connect_from(int port, const char* source = "127.0.0.1") {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in src{};
  src.sin_family = AF_INET;
  inet_pton(AF_INET, source, &src.sin_addr);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0 ||
      connect(fd, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

inline bool send_all(int fd, const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

// Reads until the peer closes or `timeout` passes; *closed tells which.
inline std::string read_until_close(int fd, std::chrono::milliseconds timeout, bool* closed = nullptr) {
  std::string out;
  const auto end = std::chrono::steady_clock::now() + timeout;
  if (closed) *closed = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
    if (left.count() <= 0) return out;
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return out;
    char buf[65536];
    const ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) {
      if (closed) *closed = true;
      return out;
    }
    out.append(buf, static_cast<size_t>(n));
  }
}

struct RawReply {
  int status = 0;  // 0: no reply
  std::string head, body;
};

inline RawReply parse_reply(const std::string& raw) {
  RawReply r;
  const size_t split = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || split == std::string::npos) return r;
  r.status = std::stoi(raw.substr(9, 3));
  r.head = raw.substr(0, split);
  r.body = raw.substr(split + 4);
  return r;
}

// One request on its own connection ("Connection: close"), the whole reply read.
inline RawReply http_call(int port, const std::string& method, const std::string& path, const std::string& body = {},
                          const std::string& extra_headers = {}, const char* source = "127.0.0.1",
                          std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  const int fd = connect_from(port, source);
  if (fd < 0) return {};
  const std::string request = method + " " + path + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n" +
                              "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                              "\r\n" + extra_headers + "\r\n" + body;
  RawReply r;
  if (send_all(fd, request)) r = parse_reply(read_until_close(fd, timeout));
  close(fd);
  return r;
}

}  // namespace kvserve::testing
