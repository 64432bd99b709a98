// What libmicrohttpd does not do for us: a deadline on a whole request's arrival. Its own
// timeout is for inactivity, so a client that trickles a byte every few seconds (slowloris) or
// sends half a header and closes its side holds a connection slot for as long as it likes. This
// keeps each connection's phase (on the daemon's thread) and a thread that, a few times a
// second, shuts down the socket of any connection whose headers or body are overdue, or whose
// client has closed before its headers were complete; the daemon then closes it as any broken
// connection. It also tells a parked whole (non-streamed) reply that its client went away, so
// the generation is cancelled instead of running to its end for nobody.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

namespace kvserve {

struct WatchLimits {
  std::chrono::milliseconds header_timeout{10000};  // connection start (or the last reply) to full headers
  std::chrono::milliseconds body_timeout{30000};    // full headers to full body
};

struct WatchCounts {
  uint64_t header_timeouts = 0, body_timeouts = 0, half_closed = 0, replies_abandoned = 0;
};

class ConnectionWatch {
 public:
  struct Conn;

  explicit ConnectionWatch(WatchLimits limits);
  ~ConnectionWatch() { stop(); }
  void start();
  void stop();

  // The daemon's thread, as each connection moves on.
  Conn* opened(int fd);
  void closed(Conn* c);
  void headers_done(Conn* c);  // the body is next
  void body_done(Conn* c);     // ours to answer: no deadline
  void reply_done(Conn* c);    // waiting for the next request's headers
  // A whole reply is parked: on_gone runs once (on the watch thread) if the client closes.
  void watch_reply(Conn* c, std::function<void()> on_gone);

  WatchCounts counts() const;

 private:
  void run();
  void check(std::chrono::steady_clock::time_point now);

  WatchLimits limits_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::set<Conn*> conns_;
  WatchCounts counts_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvserve
