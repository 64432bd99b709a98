// A fixed pool of KV block ids with a free list and reference counts. Knows nothing of
// requests: sequences hold blocks through their block tables, and a block may be held by
// several sequences at once (a shared prompt prefix).
//
// Prefix caching: a full block whose K/V are computed can be registered under the hash of its
// tokens chained with the hash of the block before it. When its last holder lets go it is not
// freed but kept, unreferenced, on an LRU list, where a later request with the same prefix can
// take it back; it is evicted (least recently used first) only when the free list is empty.
#pragma once

#include <cstdint>
#include <list>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvserve {

// The chained hash of one full block: its parent's hash and its tokens.
uint64_t block_hash(uint64_t parent, const int32_t* tokens, int32_t n);

// A change to the set of cached blocks, for those who follow it from outside (KV events).
struct CacheEvent {
  enum class Kind : uint8_t { kStored, kRemoved };
  Kind kind = Kind::kStored;
  uint64_t hash = 0;
  uint64_t parent = 0;          // kStored: the chained hash of the block before (0: none)
  std::vector<int32_t> tokens;  // kStored: the block's tokens
};

class BlockAllocator {
 public:
  explicit BlockAllocator(int32_t num_blocks);

  // Takes a free block (reference count 1), evicting the least recently used cached block when
  // nothing else is free; -1 when every block is held.
  int32_t allocate();
  // Adds a holder to a block that is held, or takes back an unreferenced cached block.
  void retain(int32_t block);
  // Drops one holder; with none left the block is free again (or kept, if cached).
  void release(int32_t block);

  // The cached block for this chained hash whose parent and tokens match exactly; -1 if none.
  int32_t lookup(uint64_t hash, uint64_t parent, const int32_t* tokens, int32_t n) const;
  // Registers a held, full, computed block under `hash`. A hash already cached keeps its block.
  // announce: its storing and eviction are recorded as events (when recording is on).
  void register_block(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens, int32_t n,
                      bool announce = true);

  // From now on, keep the events of announced blocks until take_events().
  void record_events() { recording_ = true; }
  std::vector<CacheEvent> take_events() { return std::exchange(events_, {}); }

  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  // Blocks an allocate() can produce: truly free plus unreferenced cached ones.
  int32_t num_free() const { return static_cast<int32_t>(free_.size() + lru_.size()); }
  int32_t num_used() const { return num_blocks() - num_free(); }
  int32_t num_cached() const { return static_cast<int32_t>(by_hash_.size()); }
  int64_t evictions() const { return evictions_; }
  int32_t ref_count(int32_t block) const { return ref_counts_[block]; }

  // Every block is in exactly one state: held (count > 0, on no list), unreferenced and cached
  // (on the LRU list once), or free (on the free list once, not cached). For tests.
  bool consistent() const;

 private:
  struct CacheEntry {
    uint64_t hash = 0;
    uint64_t parent = 0;
    std::vector<int32_t> tokens;
    std::list<int32_t>::iterator lru_pos;
    bool on_lru = false;
    bool announce = true;
  };
  void uncache(int32_t block);

  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> free_;  // a stack: the most recently freed block is reused first
  std::list<int32_t> lru_;     // unreferenced cached blocks, least recently used first
  std::unordered_map<int32_t, CacheEntry> cached_;   // block -> its entry
  std::unordered_map<uint64_t, int32_t> by_hash_;    // hash -> block
  int64_t evictions_ = 0;
  bool recording_ = false;
  std::vector<CacheEvent> events_;
};

}  // namespace kvserve
