#include "grammar/grammar.h"

#include <algorithm>
#include <map>

namespace kvserve::grammar {
namespace {

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, uint8_t* out, int n) {
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return;
  }
  static const uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i, cp >>= 6) out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
}

// [lo, hi] of code points of one encoded length, split until each byte position is a plain
// range (the classic construction: split where lower bits are not all-0 at lo or all-1 at hi).
void split(uint32_t lo, uint32_t hi, std::vector<std::vector<CharRange>>& out) {
  const int n = utf8_length(lo);
  if (n != utf8_length(hi)) {
    const uint32_t edge = n == 1 ? 0x7F : n == 2 ? 0x7FF : 0xFFFF;
    split(lo, edge, out);
    split(edge + 1, hi, out);
    return;
  }
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a, n);
  encode(hi, b, n);
  std::vector<CharRange> s;
  for (int i = 0; i < n; ++i) s.push_back({a[i], b[i]});
  out.push_back(std::move(s));
}

}  // namespace

std::vector<std::vector<CharRange>> utf8_sequences(const std::vector<CharRange>& code_points) {
  std::vector<std::vector<CharRange>> out;
  for (const CharRange& r : code_points) split(r.lo, r.hi, out);
  return out;
}

// Lowers a RuleSet: named rules first get indices, then each body is lowered into alternatives
// of elements; classes, repetitions and nested alternations become anonymous rules.
class Lowering {
 public:
  Lowering(const RuleSet& rules, const GrammarLimits& limits) : rules_(rules), limits_(limits) {}

  Grammar run() {
    if (!rules_.has(rules_.root)) throw GrammarError("the grammar has no rule '" + rules_.root + "'");
    for (const auto& [name, body] : rules_.rules) new_rule(name);
    for (size_t r = 0; r < rules_.rules.size(); ++r) {
      owner_ = rules_.rules[r].first;
      const Node& body = rules_.rules[r].second;
      // Lowering adds rules (bodies_ grows), so each result is taken before indexing bodies_.
      if (body.kind == Node::Kind::kAlt) {
        for (const Node& k : body.kids) {
          Alt a = lower(k);
          bodies_[r].push_back(std::move(a));
        }
      } else {
        Alt a = lower(body);
        bodies_[r].push_back(std::move(a));
      }
    }
    check_left_recursion();
    Grammar g;
    g.classes_ = std::move(classes_);
    g.names_ = std::move(names_);
    g.alts_.resize(bodies_.size());
    for (size_t r = 0; r < bodies_.size(); ++r) {
      for (const auto& a : bodies_[r]) {
        g.alts_[r].push_back(static_cast<uint32_t>(g.elems_.size()));
        g.elems_.insert(g.elems_.end(), a.begin(), a.end());
        g.elems_.push_back(Element{Element::kEnd, 0});
      }
    }
    g.root_ = static_cast<uint32_t>(rules_.index.at(rules_.root));
    return g;
  }

 private:
  using Alt = std::vector<Element>;

  uint32_t new_rule(const std::string& name) {
    names_.push_back(name);
    bodies_.emplace_back();
    return static_cast<uint32_t>(bodies_.size() - 1);
  }
  uint32_t anon_rule(std::vector<Alt> alts) {
    const uint32_t r = new_rule(owner_ + "#" + std::to_string(anon_++));
    bodies_[r] = std::move(alts);
    return r;
  }
  void count(int64_t n) {
    elements_ += n;
    if (elements_ > limits_.max_elements)
      throw GrammarError("the grammar is too large (over " + std::to_string(limits_.max_elements) +
                         " elements once repetitions are expanded)");
  }
  uint32_t byte_class(const std::vector<CharRange>& ranges) {
    std::array<uint64_t, 4> bits{};
    for (const CharRange& r : ranges)
      for (uint32_t b = r.lo; b <= r.hi && b < 256; ++b) bits[b >> 6] |= uint64_t{1} << (b & 63);
    auto [it, fresh] = class_index_.try_emplace(bits, static_cast<uint32_t>(classes_.size()));
    if (fresh) classes_.push_back(bits);
    return it->second;
  }
  Element chars_element(const std::vector<CharRange>& ranges) {
    std::vector<std::pair<uint32_t, uint32_t>> key;
    for (const CharRange& r : ranges) key.emplace_back(r.lo, r.hi);
    if (auto it = chars_rule_.find(key); it != chars_rule_.end()) return {Element::kRef, it->second};
    auto seqs = utf8_sequences(ranges);
    if (seqs.size() == 1 && seqs[0].size() == 1) return {Element::kByte, byte_class(seqs[0])};
    std::vector<Alt> alts;
    for (const auto& s : seqs) {
      Alt a;
      for (const CharRange& b : s) a.push_back({Element::kByte, byte_class({b})});
      count(static_cast<int64_t>(a.size()) + 1);
      alts.push_back(std::move(a));
    }
    const uint32_t r = anon_rule(std::move(alts));
    chars_rule_[key] = r;
    return {Element::kRef, r};
  }

  Alt lower(const Node& n) {
    Alt out;
    lower_into(n, out);
    return out;
  }
  void lower_into(const Node& n, Alt& out) {
    switch (n.kind) {
      case Node::Kind::kEmpty:
        return;
      case Node::Kind::kLiteral:
        count(static_cast<int64_t>(n.text.size()));
        for (unsigned char c : n.text) out.push_back({Element::kByte, byte_class({{c, c}})});
        return;
      case Node::Kind::kBytes:
        count(1);
        out.push_back({Element::kByte, byte_class(n.ranges)});
        return;
      case Node::Kind::kChars:
        count(1);
        out.push_back(chars_element(n.ranges));
        return;
      case Node::Kind::kSeq:
        for (const Node& k : n.kids) lower_into(k, out);
        return;
      case Node::Kind::kAlt: {
        std::vector<Alt> alts;
        for (const Node& k : n.kids) alts.push_back(lower(k));
        count(static_cast<int64_t>(alts.size()) + 1);
        out.push_back({Element::kRef, anon_rule(std::move(alts))});
        return;
      }
      case Node::Kind::kRef: {
        auto it = rules_.index.find(n.text);
        if (it == rules_.index.end()) throw GrammarError("rule '" + n.text + "' is used but not defined");
        count(1);
        out.push_back({Element::kRef, static_cast<uint32_t>(it->second)});
        return;
      }
      case Node::Kind::kRepeat:
        lower_repeat(n, out);
        return;
    }
  }
  void lower_repeat(const Node& n, Alt& out) {
    if (n.min > limits_.max_repeat || n.max > limits_.max_repeat)
      throw GrammarError("a repetition bound over " + std::to_string(limits_.max_repeat));
    if (n.max == 0) return;
    Alt body = lower(n.kids[0]);
    if (body.empty()) return;  // repeating nothing is nothing
    Element unit = body.size() == 1 ? body[0] : Element{Element::kRef, anon_rule({std::move(body)})};
    count(n.min);
    for (int32_t i = 0; i < n.min; ++i) out.push_back(unit);
    if (n.max < 0) {  // S ::= unit S | ""
      const uint32_t s = new_rule(owner_ + "#" + std::to_string(anon_++));
      bodies_[s] = {Alt{unit, Element{Element::kRef, s}}, Alt{}};
      count(4);
      out.push_back({Element::kRef, s});
      return;
    }
    // Up to max - min more, nested so that there is one way to match each count:
    // O1 ::= unit | "", Ok ::= unit O(k-1) | "".
    uint32_t prev = 0;
    for (int32_t k = 1; k <= n.max - n.min; ++k) {
      Alt a{unit};
      if (k > 1) a.push_back({Element::kRef, prev});
      count(static_cast<int64_t>(a.size()) + 2);
      prev = anon_rule({std::move(a), Alt{}});
    }
    if (n.max > n.min) out.push_back({Element::kRef, prev});
  }

  // A rule that can reach itself before consuming a byte would expand forever.
  void check_left_recursion() const {
    const size_t n = bodies_.size();
    std::vector<uint8_t> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        for (const Alt& a : bodies_[r])
          if (std::all_of(a.begin(), a.end(), [&](const Element& e) { return e.kind == Element::kRef && nullable[e.value]; })) {
            nullable[r] = 1;
            changed = true;
            break;
          }
      }
    }
    std::vector<std::vector<uint32_t>> first(n);  // rules r may start with
    for (size_t r = 0; r < n; ++r)
      for (const Alt& a : bodies_[r])
        for (const Element& e : a) {
          if (e.kind != Element::kRef) break;
          first[r].push_back(e.value);
          if (!nullable[e.value]) break;
        }
    std::vector<uint8_t> color(n, 0);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<uint32_t, size_t>> path;
    for (uint32_t s = 0; s < n; ++s) {
      if (color[s]) continue;
      path.emplace_back(s, 0);
      color[s] = 1;
      while (!path.empty()) {
        auto& [r, i] = path.back();
        if (i == first[r].size()) {
          color[r] = 2;
          path.pop_back();
          continue;
        }
        const uint32_t next = first[r][i++];
        if (color[next] == 1)
          throw GrammarError("rule '" + visible_name(next) +
                             "' can reach itself without consuming anything (left recursion, or a repeated part "
                             "that can match nothing)");
        if (color[next] == 0) {
          color[next] = 1;
          path.emplace_back(next, 0);
        }
      }
    }
  }
  std::string visible_name(uint32_t r) const {
    const std::string& s = names_[r];
    return s.substr(0, s.find('#'));
  }

  const RuleSet& rules_;
  const GrammarLimits& limits_;
  std::vector<std::vector<Alt>> bodies_;
  std::vector<std::string> names_;
  std::vector<std::array<uint64_t, 4>> classes_;
  std::map<std::array<uint64_t, 4>, uint32_t> class_index_;
  std::map<std::vector<std::pair<uint32_t, uint32_t>>, uint32_t> chars_rule_;
  std::string owner_;
  int64_t anon_ = 0;
  int64_t elements_ = 0;
};

Grammar Grammar::compile(const RuleSet& rules, const GrammarLimits& limits) { return Lowering(rules, limits).run(); }

}  // namespace kvserve::grammar
