#include "kv_cache/block_allocator.h"

#include <stdexcept>
#include <string>

namespace kvserve {

uint64_t block_hash(uint64_t parent, const int32_t* tokens, int32_t n) {
  // splitmix64-style mixing of the parent hash and each token.
  uint64_t h = parent ^ 0x9E3779B97F4A7C15ull;
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (int32_t i = 0; i < n; ++i) h = mix(h + static_cast<uint32_t>(tokens[i]) + 0x9E3779B97F4A7C15ull);
  return mix(h + static_cast<uint64_t>(n));
}

BlockAllocator::BlockAllocator(int32_t num_blocks) : ref_counts_(num_blocks, 0) {
  if (num_blocks <= 0) throw std::invalid_argument("BlockAllocator: num_blocks must be positive");
  free_.reserve(num_blocks);
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

void BlockAllocator::uncache(int32_t block) {
  auto it = cached_.find(block);
  if (it == cached_.end()) return;
  if (recording_ && it->second.announce) events_.push_back({CacheEvent::Kind::kRemoved, it->second.hash, 0, {}});
  if (it->second.on_lru) lru_.erase(it->second.lru_pos);
  by_hash_.erase(it->second.hash);
  cached_.erase(it);
}

int32_t BlockAllocator::allocate() {
  int32_t b;
  if (!free_.empty()) {
    b = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    b = lru_.front();  // evict the least recently used cached block
    uncache(b);
    ++evictions_;
  } else {
    return -1;
  }
  ref_counts_[b] = 1;
  return b;
}

void BlockAllocator::retain(int32_t block) {
  if (ref_counts_.at(block) == 0) {
    auto it = cached_.find(block);
    if (it == cached_.end() || !it->second.on_lru)
      throw std::logic_error("retain of free KV block " + std::to_string(block));
    lru_.erase(it->second.lru_pos);
    it->second.on_lru = false;
  }
  ++ref_counts_[block];
}

void BlockAllocator::release(int32_t block) {
  if (ref_counts_.at(block) <= 0)
    throw std::logic_error("release of free KV block " + std::to_string(block));
  if (--ref_counts_[block] > 0) return;
  auto it = cached_.find(block);
  if (it != cached_.end()) {
    it->second.lru_pos = lru_.insert(lru_.end(), block);
    it->second.on_lru = true;
  } else {
    free_.push_back(block);
  }
}

int32_t BlockAllocator::lookup(uint64_t hash, uint64_t parent, const int32_t* tokens, int32_t n) const {
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return -1;
  const CacheEntry& e = cached_.at(it->second);
  // Hashes only point the way; the parent and the tokens themselves must match.
  if (e.parent != parent || static_cast<int32_t>(e.tokens.size()) != n) return -1;
  for (int32_t i = 0; i < n; ++i)
    if (e.tokens[i] != tokens[i]) return -1;
  return it->second;
}

void BlockAllocator::register_block(int32_t block, uint64_t hash, uint64_t parent, const int32_t* tokens,
                                    int32_t n, bool announce) {
  if (ref_counts_.at(block) <= 0) throw std::logic_error("register of unheld KV block " + std::to_string(block));
  if (by_hash_.count(hash) || cached_.count(block)) return;
  CacheEntry e;
  e.hash = hash;
  e.parent = parent;
  e.tokens.assign(tokens, tokens + n);
  e.announce = announce;
  if (recording_ && announce) events_.push_back({CacheEvent::Kind::kStored, hash, parent, e.tokens});
  cached_.emplace(block, std::move(e));
  by_hash_.emplace(hash, block);
}

bool BlockAllocator::consistent() const {
  std::vector<int> on_free(ref_counts_.size(), 0), on_lru(ref_counts_.size(), 0);
  for (int32_t b : free_) {
    if (b < 0 || b >= num_blocks() || on_free[b]++) return false;
  }
  for (int32_t b : lru_) {
    if (b < 0 || b >= num_blocks() || on_lru[b]++) return false;
  }
  for (size_t b = 0; b < ref_counts_.size(); ++b) {
    const bool cached = cached_.count(static_cast<int32_t>(b)) != 0;
    if (ref_counts_[b] < 0) return false;
    if (ref_counts_[b] > 0 && (on_free[b] || on_lru[b])) return false;  // held and free at once
    if (ref_counts_[b] == 0 && on_free[b] + on_lru[b] != 1) return false;
    if (on_free[b] && cached) return false;
    if (on_lru[b] && !cached) return false;
  }
  for (const auto& [hash, block] : by_hash_) {
    auto it = cached_.find(block);
    if (it == cached_.end() || it->second.hash != hash) return false;
  }
  return by_hash_.size() == cached_.size();
}

}  // namespace kvserve
