// The prefix cache's changes as the engine loop makes them, for a publisher outside the engine
// (llm-d's precise prefix-cache routing follows a server's KV events): each step's changes in
// one batch. Only the first layer group's blocks are announced: a model with windowed layers
// caches each block once per group, under keys derived from the same hash.
#pragma once

#include <cstdint>
#include <vector>

#include "kv_cache/block_allocator.h"

namespace kvserve {

struct KvEventBatch {
  double timestamp = 0;    // seconds since the Unix epoch
  int32_t block_size = 0;  // tokens per block
  std::vector<CacheEvent> events;
};

class KvEventListener {
 public:
  virtual ~KvEventListener() = default;
  // Called on the engine loop thread after a step that changed the cache: must return quickly
  // (queue the batch, never block on a network).
  virtual void on_kv_events(KvEventBatch batch) = 0;
};

}  // namespace kvserve
