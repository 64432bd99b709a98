#include "kv_event_publisher.h"

#include <zmq.h>

#include <chrono>
#include <cstring>

#include "common/config_error.h"

namespace kvserve {
namespace {

// The few msgpack forms a batch needs, written big-endian as the format wants.
class Msgpack {
 public:
  void array(size_t n) {
    if (n < 16) byte(0x90 | static_cast<uint8_t>(n));
    else if (n < 65536) byte(0xdc), be(n, 2);
    else byte(0xdd), be(n, 4);
  }
  void str(const std::string& s) {
    const size_t n = s.size();
    if (n < 32) byte(0xa0 | static_cast<uint8_t>(n));
    else if (n < 256) byte(0xd9), be(n, 1);
    else if (n < 65536) byte(0xda), be(n, 2);
    else byte(0xdb), be(n, 4);
    out_ += s;
  }
  void uint(uint64_t v) {
    if (v < 128) byte(static_cast<uint8_t>(v));
    else if (v < 256) byte(0xcc), be(v, 1);
    else if (v < 65536) byte(0xcd), be(v, 2);
    else if (v < (1ull << 32)) byte(0xce), be(v, 4);
    else byte(0xcf), be(v, 8);
  }
  void nil() { byte(0xc0); }
  void float64(double d) {
    uint64_t bits;
    std::memcpy(&bits, &d, 8);
    byte(0xcb);
    be(bits, 8);
  }
  std::string take() { return std::move(out_); }

 private:
  void byte(uint8_t b) { out_ += static_cast<char>(b); }
  void be(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) byte(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::string out_;
};

constexpr const char* kMedium = "CPU";  // where the blocks live: this server's RAM

}  // namespace

std::string encode_kv_event_batch(const KvEventBatch& b) {
  Msgpack m;
  m.array(2);
  m.float64(b.timestamp);
  m.array(b.events.size());
  for (const CacheEvent& e : b.events) {
    if (e.kind == CacheEvent::Kind::kStored) {
      m.array(7);
      m.str("BlockStored");
      m.array(1);
      m.uint(e.hash);
      if (e.parent == 0) m.nil();
      else m.uint(e.parent);
      m.array(e.tokens.size());
      for (int32_t t : e.tokens) m.uint(static_cast<uint32_t>(t));
      m.uint(static_cast<uint64_t>(b.block_size));
      m.nil();  // lora_id: no adapters here
      m.str(kMedium);
    } else {
      m.array(3);
      m.str("BlockRemoved");
      m.array(1);
      m.uint(e.hash);
      m.str(kMedium);
    }
  }
  return m.take();
}

KvEventPublisher::KvEventPublisher(const std::string& endpoint, std::string topic, size_t max_queued)
    : topic_(std::move(topic)), max_queued_(max_queued) {
  context_ = zmq_ctx_new();
  socket_ = context_ ? zmq_socket(context_, ZMQ_PUB) : nullptr;
  const int linger = 0;
  // ZeroMQ drops messages for a subscriber past the high-water mark (1,000 by default): a
  // subscriber that falls a few seconds behind a busy engine would lose events.
  const int high_water = 100000;
  if (!socket_ || zmq_setsockopt(socket_, ZMQ_LINGER, &linger, sizeof(linger)) != 0 ||
      zmq_setsockopt(socket_, ZMQ_SNDHWM, &high_water, sizeof(high_water)) != 0 ||
      zmq_bind(socket_, endpoint.c_str()) != 0) {
    const std::string why = zmq_strerror(zmq_errno());
    if (socket_) zmq_close(socket_);
    if (context_) zmq_ctx_term(context_);
    throw ConfigError("server.kv_events_endpoint: cannot bind " + endpoint + ": " + why);
  }
  char last[256] = {};
  size_t len = sizeof(last);
  bound_ = zmq_getsockopt(socket_, ZMQ_LAST_ENDPOINT, last, &len) == 0 ? std::string(last) : endpoint;
  // A restarted server holds nothing: subscribers drop what they knew of it.
  KvEventBatch opening;  // no events and no block size: AllBlocksCleared
  opening.timestamp = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  queue_.push_back(std::move(opening));
  thread_ = std::thread([this] { run(); });
}

KvEventPublisher::~KvEventPublisher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  thread_.join();
  zmq_close(socket_);
  zmq_ctx_term(context_);
}

void KvEventPublisher::on_kv_events(KvEventBatch batch) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.size() >= max_queued_) {
      ++dropped_;
      return;
    }
    queue_.push_back(std::move(batch));
  }
  cv_.notify_one();
}

int64_t KvEventPublisher::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void KvEventPublisher::run() {
  for (;;) {
    KvEventBatch batch;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      batch = std::move(queue_.front());
      queue_.pop_front();
    }
    std::string payload;
    if (batch.events.empty() && batch.block_size == 0) {  // the opening AllBlocksCleared
      Msgpack m;
      m.array(2);
      m.float64(batch.timestamp);
      m.array(1);
      m.array(1);
      m.str("AllBlocksCleared");
      payload = m.take();
    } else {
      payload = encode_kv_event_batch(batch);
    }
    char seq[8];
    for (int i = 0; i < 8; ++i) seq[i] = static_cast<char>(seq_ >> (8 * (7 - i)));
    ++seq_;
    zmq_send(socket_, topic_.data(), topic_.size(), ZMQ_SNDMORE);
    zmq_send(socket_, seq, sizeof(seq), ZMQ_SNDMORE);
    zmq_send(socket_, payload.data(), payload.size(), 0);
  }
}

}  // namespace kvserve
