// The prefix cache's changes published as vLLM publishes its KV events, for llm-d's precise
// prefix-cache routing (its kv-cache indexer subscribes to them): a ZeroMQ PUB socket sending,
// per engine step that changed the cache, a three-part message (topic, sequence number as 8
// big-endian bytes, payload), the payload a msgpack array [timestamp, [event, ...]] whose events
// are ["BlockStored", [hash], parent hash or nil, [token ids], block size, lora id (nil), medium],
// ["BlockRemoved", [hash], medium] and ["AllBlocksCleared"] (sent once at start: a restarted
// server holds nothing). Publishing never blocks the engine: batches queue for the publisher's
// thread (dropped, and counted, past the queue's bound).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/kv_events.h"

namespace kvserve {

// The msgpack payload of one batch (for the publisher and its tests).
std::string encode_kv_event_batch(const KvEventBatch& batch);

class KvEventPublisher : public KvEventListener {
 public:
  // endpoint: a ZeroMQ address to bind ("tcp://*:5557", "tcp://127.0.0.1:*" for any free port,
  // "ipc:///path"); throws ConfigError naming server.kv_events_endpoint when it cannot bind.
  KvEventPublisher(const std::string& endpoint, std::string topic, size_t max_queued = 4096);
  ~KvEventPublisher() override;
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  void on_kv_events(KvEventBatch batch) override;
  // The address bound, with the port taken ("tcp://127.0.0.1:40123").
  const std::string& bound_endpoint() const { return bound_; }
  int64_t dropped() const;

 private:
  void run();

  void* context_ = nullptr;
  void* socket_ = nullptr;
  std::string topic_, bound_;
  size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<KvEventBatch> queue_;
  bool stop_ = false;
  int64_t dropped_ = 0;
  uint64_t seq_ = 0;
  std::thread thread_;
};

}  // namespace kvserve
