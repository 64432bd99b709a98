// The pushdown side of matching: a stack of grammar positions is a node in a pool of shared
// tails, (position, parent) interned so that equal stacks are equal ids. A state is the sorted
// set of stacks the bytes so far allow; the top of each stack is a byte element, and stack 0
// (empty) means the root rule is complete. States are interned too, and each (state, byte)
// step is computed once: walking the vocabulary and checking tokens are then table lookups.
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
  // dense: steps in a 256-entry row per state (fast; 1 KiB a state), for the few states of a
  // grammar's vocabulary walks; otherwise in a hash map (a long generation's many states).
  explicit StackPool(const Grammar& g, bool dense = false);

  struct Node {
    uint32_t pos;     // an element position: the top's is a byte element, others are return points
    uint32_t parent;  // 0: the bottom
  };
  const Node& node(uint32_t id) const { return nodes_[id]; }
  uint32_t intern(uint32_t pos, uint32_t parent);

  // Interned states: id 0 is the dead (empty) state.
  static constexpr uint32_t kDead = 0;
  uint32_t start();                       // where matching starts
  uint32_t state_of(State s);             // s sorted and unique
  const State& stacks(uint32_t sid) const { return states_[sid]; }
  bool complete(uint32_t sid) const { return flags_[sid] & 1; }  // the root rule may end here
  bool live(uint32_t sid) const { return flags_[sid] & 2; }      // some stack can take a byte
  // The state after one byte (kDead when no stack takes it). Throws GrammarError when the
  // result has more than kMaxStacks stacks.
  uint32_t step(uint32_t sid, uint8_t byte);
  size_t size() const { return nodes_.size(); }

 private:
  // The stacks reached by entering position `pos` with return stack `parent` (appended to out).
  void expand(uint32_t pos, uint32_t parent, State& out);

  struct StateHash {
    size_t operator()(const State& s) const {
      uint64_t h = 1469598103934665603ull;
      for (uint32_t x : s) h = (h ^ x) * 1099511628211ull;
      return static_cast<size_t>(h);
    }
  };

  const Grammar& g_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> index_;
  std::vector<State> states_;
  std::vector<uint8_t> flags_;
  std::unordered_map<State, uint32_t, StateHash> state_index_;
  bool dense_;
  std::unordered_map<uint64_t, uint32_t> steps_;  // (state << 8 | byte) -> state
  std::vector<uint32_t> rows_;                     // dense: [state][byte] -> state, ~0u unknown
  std::vector<std::pair<uint32_t, uint32_t>> work_, seen_;  // expand's scratch
  State next_;
};

}  // namespace kvserve::grammar
