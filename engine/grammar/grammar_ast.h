// The grammar as the front parsers write it (GBNF, regular expressions, JSON Schema): named
// rules of nested nodes over code points and bytes, before lowering to the byte-level automaton
// of grammar.h.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kvserve::grammar {

// Every refusal of a grammar, schema or pattern: bad syntax, an unsupported keyword, a grammar
// past the size limits. The message names what is wrong and where.
class GrammarError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A closed range of code points (kChars) or of bytes (kBytes).
struct CharRange {
  uint32_t lo = 0, hi = 0;
};

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct Node {
  enum class Kind : uint8_t {
    kEmpty,    // matches nothing-long: ""
    kSeq,      // kids one after another
    kAlt,      // one of the kids
    kChars,    // one code point in `ranges`, written as UTF-8
    kBytes,    // one byte in `ranges` (0-255)
    kLiteral,  // the bytes of `text`
    kRef,      // the rule named `text`
    kRepeat,   // kids[0], min to max times (max -1: unbounded)
  };
  Kind kind = Kind::kEmpty;
  std::vector<Node> kids;
  std::vector<CharRange> ranges;  // sorted, disjoint, not adjacent
  std::string text;
  int32_t min = 0, max = -1;
};

// Builders. chars() sorts and merges its ranges; negate takes the complement over all code
// points (surrogates excluded, as UTF-8 cannot carry them).
Node empty();
Node lit(std::string bytes);
Node seq(std::vector<Node> kids);
Node alt(std::vector<Node> kids);
Node chars(std::vector<CharRange> ranges, bool negate = false);
Node bytes(std::vector<CharRange> ranges);
Node ref(std::string rule);
Node repeat(Node x, int32_t min, int32_t max);
inline Node opt(Node x) { return repeat(std::move(x), 0, 1); }
inline Node star(Node x) { return repeat(std::move(x), 0, -1); }
inline Node plus(Node x) { return repeat(std::move(x), 1, -1); }

// Sorted, disjoint, merged; with negate, the complement within [0, 0x10FFFF] minus surrogates.
std::vector<CharRange> normalize_ranges(std::vector<CharRange> ranges, bool negate);

// Named rules; `root` is where a match starts.
struct RuleSet {
  std::vector<std::pair<std::string, Node>> rules;
  std::map<std::string, size_t> index;
  std::string root = "root";

  bool has(const std::string& name) const { return index.count(name) > 0; }
  // Adds a rule; a second definition of a name replaces nothing and throws.
  void add(const std::string& name, Node body);
  // A name not yet used that starts with `base`.
  std::string fresh(const std::string& base) const;
};

}  // namespace kvserve::grammar
