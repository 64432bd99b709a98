// Constrained decoding: a compiled grammar with the vocabulary it masks, and one matcher per
// sequence that says which tokens may come next, advances by the token sampled, and rolls back.
//
// Masks are fast because most of the work is done once per grammar: for the top few frames of a
// stack (its "signature"), every token is classified by walking the sorted vocabulary: accepted
// whatever lies below those frames, rejected whatever lies below, or uncertain (it reaches past
// them). Only uncertain tokens are checked against a sequence's whole stack at each step.
// Neither class is thread-safe: one engine loop thread uses them.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/stacks.h"
#include "grammar/token_index.h"

namespace kvserve::grammar {

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar g, std::shared_ptr<const TokenIndex> index);
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const Grammar& grammar() const { return g_; }
  const TokenIndex& index() const { return *index_; }

  // Frames of a stack that decide a token's class: the top and up to two return points.
  static constexpr int kSignatureDepth = 3;
  using Signature = std::array<uint32_t, kSignatureDepth>;  // positions; ~0u past the bottom

  struct TokenClasses {
    std::vector<uint64_t> accept_bits;  // [ceil(V / 64)] when many are accepted, else empty
    std::vector<int32_t> accept_list;   // when few are
    std::vector<int32_t> uncertain;     // to check against the whole stack
  };
  // Classes for a signature, computed on first use and kept for the grammar's life.
  const TokenClasses& classes(const Signature& sig);
  size_t signatures() const { return cache_.size(); }

 private:
  Grammar g_;
  std::shared_ptr<const TokenIndex> index_;
  StackPool pool_;  // the signatures' truncated stacks
  std::map<Signature, TokenClasses> cache_;
  std::vector<uint32_t> level_;   // walk scratch: the state after d bytes
  std::vector<uint8_t> escaped_;  // walk scratch: a frame ended with bytes to come before depth d
};

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<CompiledGrammar> grammar);

  // mask: [ceil(V / 64)] bits, set where the next token may be that token. End-of-generation
  // tokens are allowed where the grammar is complete.
  void fill_mask(std::vector<uint64_t>& mask);
  // Advances by a token; false (and no change) when the grammar does not allow it.
  bool accept(int32_t token);
  // Undoes the last n accepted tokens (n at most accepted()).
  void rollback(size_t n);
  size_t accepted() const { return history_.size() - 1; }
  bool complete() const { return ended_ || pool_.complete(history_.back()); }  // may end here
  bool ended() const { return ended_; }  // an end-of-generation token was accepted
  bool can_continue() const { return !ended_ && pool_.live(history_.back()); }

 private:
  bool allows(uint32_t stack, const std::string& bytes);

  std::shared_ptr<CompiledGrammar> g_;
  StackPool pool_;
  std::vector<uint32_t> history_;  // [0] the start; back() the current state (pool_'s ids)
  std::vector<uint8_t> ended_at_;  // [accepted] 1 where an end-of-generation token was accepted
  bool ended_ = false;
};

}  // namespace kvserve::grammar
