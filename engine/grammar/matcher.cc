#include "grammar/matcher.h"

#include <algorithm>

namespace kvserve::grammar {

CompiledGrammar::CompiledGrammar(Grammar g, std::shared_ptr<const TokenIndex> index)
    : g_(std::move(g)), index_(std::move(index)), pool_(g_, /*dense=*/true) {}

const CompiledGrammar::TokenClasses& CompiledGrammar::classes(const Signature& sig) {
  if (auto it = cache_.find(sig); it != cache_.end()) return it->second;
  uint32_t stack = 0;  // the truncated stack: a pop below it is an escape
  for (int i = kSignatureDepth - 1; i >= 0; --i)
    if (sig[i] != ~0u) stack = pool_.intern(sig[i], stack);
  const TokenIndex& ix = *index_;
  const std::vector<int32_t>& sorted = ix.sorted();
  level_.resize(ix.max_length() + 1);
  escaped_.assign(ix.max_length() + 1, 0);
  level_[0] = pool_.state_of({stack});
  std::vector<int32_t> accepted, uncertain;
  const auto& first = g_.byte_class(g_.at(sig[0]).value);
  for (int b = 0; b < 256; ++b) {
    if (!((first[b >> 6] >> (b & 63)) & 1)) continue;
    const uint32_t end = ix.begin(b + 1);
    size_t depth_ok = 0;  // level_[0..depth_ok] hold the states of the previous token's prefix
    for (uint32_t i = ix.begin(b); i < end;) {
      const std::string_view s = ix.sorted_bytes(i);
      size_t d = i == ix.begin(b) ? 0 : std::min<size_t>(ix.lcp(i), depth_ok);
      while (d < s.size() && pool_.live(level_[d])) {
        level_[d + 1] = pool_.step(level_[d], static_cast<uint8_t>(s[d]));
        escaped_[d + 1] = escaped_[d] || pool_.complete(level_[d]);
        ++d;
      }
      depth_ok = d;
      if (d == s.size()) {
        if (level_[d] != StackPool::kDead) {
          accepted.push_back(sorted[i]);
        } else if (escaped_[d]) {
          uncertain.push_back(sorted[i]);
        }
        ++i;
        continue;
      }
      // Nothing live after d bytes: so for every following token with the same d bytes.
      const bool unsure = escaped_[d] || pool_.complete(level_[d]);
      do {
        if (unsure) uncertain.push_back(sorted[i]);
        ++i;
      } while (i < end && ix.lcp(i) >= d);
    }
  }
  TokenClasses c;
  const size_t words = (static_cast<size_t>(ix.vocab_size()) + 63) / 64;
  if (accepted.size() * 4 > words * 8) {
    c.accept_bits.assign(words, 0);
    for (int32_t t : accepted) c.accept_bits[t >> 6] |= uint64_t{1} << (t & 63);
  } else {
    c.accept_list = std::move(accepted);
  }
  c.uncertain = std::move(uncertain);
  return cache_.emplace(sig, std::move(c)).first->second;
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar)
    : g_(std::move(grammar)), pool_(g_->grammar()) {
  history_.push_back(pool_.start());
}

bool GrammarMatcher::allows(uint32_t stack, const std::string& bytes) {
  uint32_t st = pool_.state_of({stack});
  for (char c : bytes)
    if ((st = pool_.step(st, static_cast<uint8_t>(c))) == StackPool::kDead) return false;
  return true;
}

void GrammarMatcher::fill_mask(std::vector<uint64_t>& mask) {
  const TokenIndex& ix = g_->index();
  mask.assign((static_cast<size_t>(ix.vocab_size()) + 63) / 64, 0);
  if (ended_) return;
  const State st = pool_.stacks(history_.back());  // a copy: allows() adds states to the pool
  auto set = [&](int32_t t) { mask[t >> 6] |= uint64_t{1} << (t & 63); };
  auto has = [&](int32_t t) { return (mask[t >> 6] >> (t & 63)) & 1; };
  if (pool_.complete(history_.back()))
    for (int32_t t : ix.eog()) set(t);
  std::vector<CompiledGrammar::Signature> done;
  for (uint32_t id : st) {
    if (id == 0) continue;
    CompiledGrammar::Signature sig;
    sig.fill(~0u);
    for (uint32_t n = id, k = 0; n != 0 && k < sig.size(); n = pool_.node(n).parent, ++k) sig[k] = pool_.node(n).pos;
    const CompiledGrammar::TokenClasses& c = g_->classes(sig);
    if (std::find(done.begin(), done.end(), sig) == done.end()) {
      done.push_back(sig);
      if (!c.accept_bits.empty()) {
        for (size_t w = 0; w < mask.size(); ++w) mask[w] |= c.accept_bits[w];
      } else {
        for (int32_t t : c.accept_list) set(t);
      }
    }
    for (int32_t t : c.uncertain)
      if (!has(t) && allows(id, ix.bytes(t))) set(t);
  }
}

bool GrammarMatcher::accept(int32_t token) {
  const TokenIndex& ix = g_->index();
  if (ended_ || token < 0 || token >= ix.vocab_size()) return false;
  if (ix.is_eog(token)) {
    if (!pool_.complete(history_.back())) return false;
    history_.push_back(history_.back());
    ended_at_.push_back(1);
    ended_ = true;
    return true;
  }
  const std::string& bytes = ix.bytes(token);
  if (bytes.empty()) return false;
  uint32_t st = history_.back();
  for (char c : bytes)
    if ((st = pool_.step(st, static_cast<uint8_t>(c))) == StackPool::kDead) return false;
  history_.push_back(st);
  ended_at_.push_back(0);
  return true;
}

void GrammarMatcher::rollback(size_t n) {
  n = std::min(n, accepted());
  history_.resize(history_.size() - n);
  ended_at_.resize(ended_at_.size() - n);
  ended_ = !ended_at_.empty() && ended_at_.back();
}

}  // namespace kvserve::grammar
