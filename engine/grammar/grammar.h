// A grammar over bytes, ready for matching: each rule a list of alternatives, each alternative a
// run of elements (a byte class or a rule reference) ended by kEnd, all in one flat array so
// that a position in it is one integer. Code points were lowered to their UTF-8 byte sequences,
// repetitions to right-recursive rules, and left recursion refused.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar_ast.h"

namespace kvserve::grammar {

// Bounds that keep a hostile grammar's compile and matching small.
struct GrammarLimits {
  int64_t max_elements = 4'000'000;  // flat elements after lowering (repetitions expanded)
  int32_t max_repeat = 100'000;      // a bounded repetition's upper bound
};

struct Element {
  enum Kind : uint8_t { kEnd, kByte, kRef };
  Kind kind = kEnd;
  uint32_t value = 0;  // kByte: class index; kRef: rule index
};

class Grammar {
 public:
  // Lowers `rules` starting at rules.root; throws GrammarError naming an undefined rule, left
  // recursion, or a limit passed.
  static Grammar compile(const RuleSet& rules, const GrammarLimits& limits = {});

  const std::vector<Element>& elements() const { return elems_; }
  const Element& at(uint32_t pos) const { return elems_[pos]; }
  bool class_has(uint32_t cls, uint8_t b) const { return (classes_[cls][b >> 6] >> (b & 63)) & 1; }
  const std::array<uint64_t, 4>& byte_class(uint32_t cls) const { return classes_[cls]; }
  const std::vector<uint32_t>& alternatives(uint32_t rule) const { return alts_[rule]; }
  uint32_t root() const { return root_; }
  size_t rule_count() const { return alts_.size(); }
  const std::string& rule_name(uint32_t r) const { return names_[r]; }

 private:
  friend class Lowering;
  std::vector<Element> elems_;
  std::vector<std::array<uint64_t, 4>> classes_;
  std::vector<std::vector<uint32_t>> alts_;  // [rule] start positions of its alternatives
  std::vector<std::string> names_;
  uint32_t root_ = 0;
};

// A code-point set as UTF-8 byte-range sequences: every sequence is 1-4 byte ranges, and the
// union of what they match is exactly the set's encodings.
std::vector<std::vector<CharRange>> utf8_sequences(const std::vector<CharRange>& code_points);

}  // namespace kvserve::grammar
