// A request's OutputConstraint as a compiled grammar over the model's vocabulary, with a cache
// so that a schema sent again is not compiled again (its token classes are kept with it).
#pragma once

#include <list>
#include <memory>
#include <mutex>
#include <string>

#include "common/request.h"
#include "grammar/matcher.h"

namespace kvserve::grammar {

// The rules a constraint stands for (after a reasoning block where c.reasoning says); throws
// GrammarError naming what is wrong.
RuleSet constraint_rules(const OutputConstraint& c);
// The same without the reasoning block.
RuleSet kind_rules(const OutputConstraint& c);

class GrammarCache {
 public:
  GrammarCache(std::shared_ptr<const TokenIndex> index, size_t capacity) : index_(std::move(index)), capacity_(capacity) {}

  // The compiled grammar for c, compiled now or taken from the cache; throws GrammarError.
  // Safe from any thread; the grammar returned is for the engine loop thread.
  std::shared_ptr<CompiledGrammar> get(const OutputConstraint& c);
  const TokenIndex& index() const { return *index_; }

 private:
  std::shared_ptr<const TokenIndex> index_;
  size_t capacity_;
  std::mutex mu_;
  std::list<std::pair<std::string, std::shared_ptr<CompiledGrammar>>> lru_;  // most recent first
};

}  // namespace kvserve::grammar
