#include "grammar/constraint.h"

#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace kvserve::grammar {

namespace {

// Byte strings that do not contain `s`: the states of its KMP automaton as rules, each able to
// stop or to take a byte to the state that byte leads to (never the last).
void add_not_containing(RuleSet& r, const std::string& name, const std::string& s) {
  const size_t n = s.size();
  std::vector<size_t> fail(n + 1, 0);
  for (size_t i = 1, k = 0; i < n; ++i) {
    while (k > 0 && s[i] != s[k]) k = fail[k];
    if (s[i] == s[k]) ++k;
    fail[i + 1] = k;
  }
  for (size_t st = 0; st < n; ++st) {
    std::vector<std::vector<CharRange>> to(n + 1);  // bytes by the state they lead to
    for (int b = 0; b < 256; ++b) {
      size_t k = st;
      while (k > 0 && static_cast<unsigned char>(s[k]) != b) k = fail[k];
      if (static_cast<unsigned char>(s[k]) == b) ++k;
      to[k].push_back({static_cast<uint32_t>(b), static_cast<uint32_t>(b)});
    }
    std::vector<Node> alts = {empty()};
    for (size_t k = 0; k < n; ++k)
      if (!to[k].empty()) alts.push_back(seq({bytes(to[k]), ref(name + "-" + std::to_string(k))}));
    r.add(name + "-" + std::to_string(st), alt(std::move(alts)));
  }
}

// The reasoning block before the answer: free text up to </think>, then the answer's grammar.
void after_reasoning(RuleSet& r, bool inside) {
  add_not_containing(r, "reasoning-text", "</think>");
  Node ws = repeat(chars({{' ', ' '}, {'\n', '\n'}, {'\t', '\t'}, {'\r', '\r'}}), 0, 8);
  Node block = seq({ref("reasoning-text-0"), lit("</think>"), ws});
  if (!inside) block = opt(seq({repeat(chars({{' ', ' '}, {'\n', '\n'}}), 0, 4), lit("<think>"), std::move(block)}));
  const std::string root = r.fresh("answer-after-reasoning");
  r.add(root, seq({std::move(block), ref(r.root)}));
  r.root = root;
}

Node renamed(Node n, const std::string& prefix) {
  if (n.kind == Node::Kind::kRef) n.text = prefix + n.text;
  for (Node& k : n.kids) k = renamed(std::move(k), prefix);
  return n;
}

// from's rules added to `to` under names with `prefix`; the name of from's root.
std::string merge_rules(RuleSet& to, const RuleSet& from, const std::string& prefix) {
  for (const auto& [name, body] : from.rules) to.add(prefix + name, renamed(body, prefix));
  return prefix + from.root;
}

RuleSet tool_call_rules(const std::string& text) {
  using ordered = nlohmann::ordered_json;
  const ordered spec = ordered::parse(text, nullptr, false);
  if (spec.is_discarded() || !spec.is_object() || !spec.contains("calls") || !spec["calls"].is_array() ||
      spec["calls"].empty())
    throw GrammarError("tool calls: a spec with calls");
  RuleSet r;
  std::vector<Node> calls;
  for (size_t i = 0; i < spec["calls"].size(); ++i) {
    const ordered& c = spec["calls"][i];
    const std::string prefix = "tool" + std::to_string(i) + "-";
    const std::string close = c.value("close", "");
    Node body;
    if (c.contains("schema")) {
      try {
        body = ref(merge_rules(r, json_schema_rules(c["schema"]), prefix));
      } catch (const GrammarError& e) {
        throw GrammarError("tool " + c.value("name", std::to_string(i)) + ": " + e.what());
      }
    } else {
      if (close.empty()) throw GrammarError("tool calls: free arguments need a close text");
      add_not_containing(r, prefix + "free", close);
      body = ref(prefix + "free-0");
    }
    calls.push_back(seq({lit(c.value("open", "")), std::move(body), lit(close)}));
  }
  r.add("tool-call", alt(std::move(calls)));
  const int32_t max = spec.value("max", 1);
  Node root = ref("tool-call");
  if (max != 1)
    root = seq({std::move(root), repeat(seq({lit(spec.value("separator", "")), ref("tool-call")}), 0, max < 0 ? -1 : max - 1)});
  // A message that may come first (gpt-oss's analysis): its open text, free text, its close.
  if (spec.contains("optional_prefix") && spec["optional_prefix"].is_object()) {
    const ordered& p = spec["optional_prefix"];
    const std::string close = p.value("close", "");
    if (close.empty()) throw GrammarError("tool calls: an optional prefix needs a close text");
    add_not_containing(r, "prefix-text", close);
    root = seq({opt(seq({lit(p.value("open", "")), ref("prefix-text-0"), lit(close)})), std::move(root)});
  }
  // Lazily: free text without the calls' opening marker, and once the marker is written, calls.
  if (const std::string marker = spec.value("lazy_marker", ""); !marker.empty()) {
    add_not_containing(r, "free-text", marker);
    root = seq({ref("free-text-0"), opt(std::move(root))});
  }
  r.add("root", std::move(root));
  return r;
}

}  // namespace

RuleSet constraint_rules(const OutputConstraint& c) {
  RuleSet r = kind_rules(c);
  if (c.reasoning >= 0) after_reasoning(r, c.reasoning == 1);
  return r;
}

RuleSet kind_rules(const OutputConstraint& c) {
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
    case OutputConstraint::Kind::kToolCalls:
      return tool_call_rules(c.text);
  }
  throw GrammarError("unknown constraint kind");
}

std::shared_ptr<CompiledGrammar> GrammarCache::get(const OutputConstraint& c) {
  std::string key = std::to_string(static_cast<int>(c.kind)) + "," + std::to_string(c.reasoning) + ":" + c.text;
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
