#include "grammar/grammar_ast.h"

#include <algorithm>

namespace kvserve::grammar {

Node empty() { return Node{}; }

Node lit(std::string bytes) {
  Node n;
  n.kind = bytes.empty() ? Node::Kind::kEmpty : Node::Kind::kLiteral;
  n.text = std::move(bytes);
  return n;
}

Node seq(std::vector<Node> kids) {
  if (kids.size() == 1) return std::move(kids[0]);
  Node n;
  n.kind = kids.empty() ? Node::Kind::kEmpty : Node::Kind::kSeq;
  n.kids = std::move(kids);
  return n;
}

Node alt(std::vector<Node> kids) {
  if (kids.size() == 1) return std::move(kids[0]);
  if (kids.empty()) throw GrammarError("an alternation with no alternatives");
  Node n;
  n.kind = Node::Kind::kAlt;
  n.kids = std::move(kids);
  return n;
}

std::vector<CharRange> normalize_ranges(std::vector<CharRange> r, bool negate) {
  for (CharRange& x : r) {
    if (x.lo > x.hi) std::swap(x.lo, x.hi);
    x.hi = std::min(x.hi, kMaxCodePoint);
  }
  std::erase_if(r, [](const CharRange& x) { return x.lo > kMaxCodePoint; });
  std::sort(r.begin(), r.end(), [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
  std::vector<CharRange> m;
  for (const CharRange& x : r) {
    if (!m.empty() && x.lo <= m.back().hi + 1) {
      m.back().hi = std::max(m.back().hi, x.hi);
    } else {
      m.push_back(x);
    }
  }
  std::vector<CharRange> out;
  if (!negate) {  // code points only: surrogates have no UTF-8 form
    for (const CharRange& x : m) {
      if (x.hi < 0xD800 || x.lo > 0xDFFF || x.hi < 256) {
        out.push_back(x);
        continue;
      }
      if (x.lo < 0xD800) out.push_back({x.lo, 0xD7FF});
      if (x.hi > 0xDFFF) out.push_back({0xE000, x.hi});
    }
    return out;
  }
  uint32_t next = 0;
  auto emit = [&](uint32_t lo, uint32_t hi) {  // [lo, hi] without the surrogates
    if (lo > hi) return;
    if (hi < 0xD800 || lo > 0xDFFF) {
      out.push_back({lo, hi});
      return;
    }
    if (lo < 0xD800) out.push_back({lo, 0xD7FF});
    if (hi > 0xDFFF) out.push_back({0xE000, hi});
  };
  for (const CharRange& x : m) {
    if (x.lo > next) emit(next, x.lo - 1);
    next = x.hi + 1;
  }
  if (next <= kMaxCodePoint) emit(next, kMaxCodePoint);
  return out;
}

Node chars(std::vector<CharRange> ranges, bool negate) {
  Node n;
  n.kind = Node::Kind::kChars;
  n.ranges = normalize_ranges(std::move(ranges), negate);
  if (n.ranges.empty()) throw GrammarError("a character class that matches no character");
  return n;
}

Node bytes(std::vector<CharRange> ranges) {
  for (const CharRange& x : ranges)
    if (x.lo > 255 || x.hi > 255) throw GrammarError("a byte range past 255");
  Node n;
  n.kind = Node::Kind::kBytes;
  n.ranges = normalize_ranges(std::move(ranges), false);
  return n;
}

Node ref(std::string rule) {
  Node n;
  n.kind = Node::Kind::kRef;
  n.text = std::move(rule);
  return n;
}

Node repeat(Node x, int32_t min, int32_t max) {
  if (min < 0 || (max >= 0 && max < min)) throw GrammarError("a repetition with bounds out of order");
  Node n;
  n.kind = Node::Kind::kRepeat;
  n.min = min;
  n.max = max;
  n.kids.push_back(std::move(x));
  return n;
}

void RuleSet::add(const std::string& name, Node body) {
  if (has(name)) throw GrammarError("rule '" + name + "' is defined twice");
  index[name] = rules.size();
  rules.emplace_back(name, std::move(body));
}

std::string RuleSet::fresh(const std::string& base) const {
  if (!has(base)) return base;
  for (int i = 1;; ++i)
    if (std::string n = base + "-" + std::to_string(i); !has(n)) return n;
}

}  // namespace kvserve::grammar
