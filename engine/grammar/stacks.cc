#include "grammar/stacks.h"

#include <algorithm>

namespace kvserve::grammar {

uint32_t StackPool::intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (uint64_t{pos} << 32) | parent;
  auto [it, fresh] = index_.try_emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (fresh) nodes_.push_back({pos, parent});
  return it->second;
}

State StackPool::start() {
  State s;
  for (uint32_t a : g_.alternatives(g_.root())) expand(a, 0, s);
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  return s;
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

void StackPool::advance(const State& from, uint8_t byte, State& to) {
  to.clear();
  for (uint32_t id : from) {
    if (id == 0) continue;
    const Node n = nodes_[id];
    if (g_.class_has(g_.at(n.pos).value, byte)) expand(n.pos + 1, n.parent, to);
  }
  std::sort(to.begin(), to.end());
  to.erase(std::unique(to.begin(), to.end()), to.end());
  if (to.size() > kMaxStacks) throw GrammarError("the grammar is too ambiguous to match (too many parses at once)");
}

}  // namespace kvserve::grammar
