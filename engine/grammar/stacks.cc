#include "grammar/stacks.h"

#include <algorithm>

namespace kvserve::grammar {

StackPool::StackPool(const Grammar& g, bool dense) : g_(g), dense_(dense) {
  nodes_.push_back({0, 0});
  state_of({});  // kDead
}

uint32_t StackPool::intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, fresh] = index_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (fresh) nodes_.push_back({pos, parent});
  return it->second;
}

uint32_t StackPool::state_of(State s) {
  auto it = state_index_.find(s);
  if (it != state_index_.end()) return it->second;
  const auto id = static_cast<uint32_t>(states_.size());
  flags_.push_back(static_cast<uint8_t>((!s.empty() && s[0] == 0 ? 1 : 0) | (!s.empty() && s.back() != 0 ? 2 : 0)));
  state_index_.emplace(s, id);
  states_.push_back(std::move(s));
  if (dense_) rows_.resize(states_.size() * 256, ~0u);
  return id;
}

uint32_t StackPool::start() {
  State s;
  for (uint32_t a : g_.alternatives(g_.root())) expand(a, 0, s);
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return state_of(std::move(s));
}

void StackPool::expand(uint32_t pos, uint32_t parent, State& out) {
  // Iterative, and each (position, parent) entered once: a grammar without left recursion ends,
  // and one with many ways to the same place does not multiply.
  work_.clear();
  seen_.clear();
  work_.emplace_back(pos, parent);
  while (!work_.empty()) {
    auto [p, par] = work_.back();
    work_.pop_back();
    if (std::find(seen_.begin(), seen_.end(), std::make_pair(p, par)) != seen_.end()) continue;
    seen_.emplace_back(p, par);
    if (seen_.size() > 4 * kMaxStacks) throw GrammarError("the grammar is too ambiguous to match (too many parses at once)");
    const Element& e = g_.at(p);
    switch (e.kind) {
      case Element::kByte:
        out.push_back(intern(p, par));
        break;
      case Element::kEnd:
        if (par == 0) {
          out.push_back(0);
        } else {
          work_.emplace_back(nodes_[par].pos, nodes_[par].parent);
        }
        break;
      case Element::kRef: {
        // A call in tail position returns straight to the caller's caller: right recursion
        // (repetition) keeps the stack flat.
        const uint32_t ret = g_.at(p + 1).kind == Element::kEnd ? par : intern(p + 1, par);
        for (uint32_t a : g_.alternatives(e.value)) work_.emplace_back(a, ret);
        break;
      }
    }
  }
}

uint32_t StackPool::step(uint32_t sid, uint8_t byte) {
  if (sid == kDead) return kDead;
  const uint64_t key = (uint64_t{sid} << 8) | byte;
  if (dense_) {
    if (const uint32_t to = rows_[key]; to != ~0u) return to;
  } else if (auto it = steps_.find(key); it != steps_.end()) {
    return it->second;
  }
  next_.clear();
  for (uint32_t id : states_[sid]) {
    if (id == 0) continue;
    const Node n = nodes_[id];
    if (g_.class_has(g_.at(n.pos).value, byte)) expand(n.pos + 1, n.parent, next_);
  }
  std::sort(next_.begin(), next_.end());
  next_.erase(std::unique(next_.begin(), next_.end()), next_.end());
  if (next_.size() > kMaxStacks) throw GrammarError("the grammar is too ambiguous to match (too many parses at once)");
  const uint32_t to = state_of(next_);
  if (dense_) {
    rows_[key] = to;
  } else {
    steps_.emplace(key, to);
  }
  return to;
}

}  // namespace kvserve::grammar
