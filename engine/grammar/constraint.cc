#include "grammar/constraint.h"

#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace kvserve::grammar {

RuleSet constraint_rules(const OutputConstraint& c) {
  RuleSet r;
  switch (c.kind) {
    case OutputConstraint::Kind::kNone:
      throw GrammarError("no constraint");
    case OutputConstraint::Kind::kJsonSchema: {
      nlohmann::ordered_json schema = nlohmann::ordered_json::parse(c.text, nullptr, false);
      if (schema.is_discarded()) throw GrammarError("json_schema: not valid JSON");
      return json_schema_rules(schema);
    }
    case OutputConstraint::Kind::kJsonObject:
      return json_object_rules();
    case OutputConstraint::Kind::kRegex:
      r.add("root", parse_regex(c.text));
      return r;
    case OutputConstraint::Kind::kChoice:
      if (c.choices.empty()) throw GrammarError("choice: an empty list");
      for (const std::string& s : c.choices)
        if (s.empty()) throw GrammarError("choice: an empty string cannot be generated");
      r.add("root", literal_trie(c.choices));
      return r;
    case OutputConstraint::Kind::kGrammar:
      return parse_gbnf(c.text);
  }
  throw GrammarError("unknown constraint kind");
}

std::shared_ptr<CompiledGrammar> GrammarCache::get(const OutputConstraint& c) {
  std::string key = std::to_string(static_cast<int>(c.kind)) + ":" + c.text;
  for (const std::string& s : c.choices) key += "\x1f" + s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it)
      if (it->first == key) {
        lru_.splice(lru_.begin(), lru_, it);
        return lru_.front().second;
      }
  }
  auto g = std::make_shared<CompiledGrammar>(Grammar::compile(constraint_rules(c)), index_);
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_ > 0) {
    lru_.emplace_front(std::move(key), g);
    if (lru_.size() > capacity_) lru_.pop_back();
  }
  return g;
}

}  // namespace kvserve::grammar
