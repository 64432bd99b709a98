// The pushdown side of matching: a stack of grammar positions is a node in a pool of shared
// tails, (position, parent) interned so that equal stacks are equal ids. A state is the sorted
// set of stacks the bytes so far allow; the top of each stack is a byte element, and stack 0
// (empty) means the root rule is complete.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace kvserve::grammar {

using State = std::vector<uint32_t>;  // sorted stack ids

// More stacks than this in one state: the grammar is too ambiguous to match.
constexpr size_t kMaxStacks = 4096;

class StackPool {
 public:
  explicit StackPool(const Grammar& g) : g_(g) { nodes_.push_back({0, 0}); }

  struct Node {
    uint32_t pos;     // an element position: the top's is a byte element, others are return points
    uint32_t parent;  // 0: the bottom
  };
  const Node& node(uint32_t id) const { return nodes_[id]; }
  uint32_t intern(uint32_t pos, uint32_t parent);

  // The stacks where matching starts.
  State start();
  // The state after one byte; empty when the byte fits no stack. Throws GrammarError when the
  // result has more than kMaxStacks stacks.
  void advance(const State& from, uint8_t byte, State& to);
  // The stacks reached by entering position `pos` with return stack `parent` (appended to out).
  void expand(uint32_t pos, uint32_t parent, State& out);
  size_t size() const { return nodes_.size(); }

 private:
  const Grammar& g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> index_;
  std::vector<std::pair<uint32_t, uint32_t>> work_, seen_;  // expand's scratch
};

inline bool is_complete(const State& s) { return !s.empty() && s[0] == 0; }
inline bool has_live(const State& s) { return !s.empty() && s.back() != 0; }

}  // namespace kvserve::grammar
