#include "http/connection_watch.h"

#include <sys/socket.h>

#include <cerrno>

namespace kvserve {

using Clock = std::chrono::steady_clock;

struct ConnectionWatch::Conn {
  enum class Phase { kHeaders, kBody, kServing };
  int fd = -1;
  Phase phase = Phase::kHeaders;
  Clock::time_point since;
  int eof_seen = 0;                  // consecutive checks that found the client's side closed
  std::function<void()> on_gone;     // a parked whole reply's cancel
};

namespace {

// The client has closed its sending side and nothing of it is left unread.
bool client_closed(int fd) {
  char byte;
  const ssize_t n = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0;
}

}  // namespace

ConnectionWatch::ConnectionWatch(WatchLimits limits) : limits_(limits) {}

void ConnectionWatch::start() { thread_ = std::thread([this] { run(); }); }

void ConnectionWatch::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ConnectionWatch::Conn* ConnectionWatch::opened(int fd) {
  auto* c = new Conn;
  c->fd = fd;
  c->since = Clock::now();
  std::lock_guard lock(mu_);
  conns_.insert(c);
  return c;
}

// The daemon calls this before it closes the socket, so the watch never shuts down a
// descriptor number that another connection has been given since.
void ConnectionWatch::closed(Conn* c) {
  std::lock_guard lock(mu_);
  conns_.erase(c);
  delete c;
}

void ConnectionWatch::headers_done(Conn* c) {
  std::lock_guard lock(mu_);
  c->phase = Conn::Phase::kBody;
  c->since = Clock::now();
  c->eof_seen = 0;
}

void ConnectionWatch::body_done(Conn* c) {
  std::lock_guard lock(mu_);
  c->phase = Conn::Phase::kServing;
}

void ConnectionWatch::reply_done(Conn* c) {
  std::lock_guard lock(mu_);
  c->phase = Conn::Phase::kHeaders;
  c->since = Clock::now();
  c->eof_seen = 0;
  c->on_gone = nullptr;
}

void ConnectionWatch::watch_reply(Conn* c, std::function<void()> on_gone) {
  std::lock_guard lock(mu_);
  c->on_gone = std::move(on_gone);
  c->eof_seen = 0;
}

WatchCounts ConnectionWatch::counts() const {
  std::lock_guard lock(mu_);
  return counts_;
}

void ConnectionWatch::run() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(250));
    if (!stopping_) check(Clock::now());
  }
}

void ConnectionWatch::check(Clock::time_point now) {
  for (Conn* c : conns_) {
    if (c->fd < 0) continue;
    const auto age = now - c->since;
    bool cut = false;
    if (c->phase == Conn::Phase::kHeaders) {
      // Seen twice, a quarter second apart, so that a request whose last bytes the daemon has
      // read but not yet handed to us is not mistaken for an abandoned one.
      c->eof_seen = client_closed(c->fd) ? c->eof_seen + 1 : 0;
      if (c->eof_seen >= 2) {
        ++counts_.half_closed;
        cut = true;
      } else if (age > limits_.header_timeout) {
        ++counts_.header_timeouts;
        cut = true;
      }
    } else if (c->phase == Conn::Phase::kBody) {
      if (age > limits_.body_timeout) {
        ++counts_.body_timeouts;
        cut = true;
      }
    } else if (c->on_gone && client_closed(c->fd)) {
      ++counts_.replies_abandoned;
      auto gone = std::move(c->on_gone);
      c->on_gone = nullptr;
      gone();
    }
    if (cut) {
      shutdown(c->fd, SHUT_RDWR);
      c->fd = -1;  // once: the daemon notices and closes it
    }
  }
}

}  // namespace kvserve
