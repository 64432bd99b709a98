#include "grammar/regex.h"

#include <cctype>
#include <cstdio>
#include <cstring>

#include "grammar/escapes.h"

namespace kvserve::grammar {
namespace {

constexpr int kMaxNesting = 256;

const std::vector<CharRange>& digit_set() {
  static const std::vector<CharRange> s = {{'0', '9'}};
  return s;
}
const std::vector<CharRange>& word_set() {
  static const std::vector<CharRange> s = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return s;
}
const std::vector<CharRange>& space_set() {
  static const std::vector<CharRange> s = {{'\t', '\r'}, {' ', ' '}};
  return s;
}

class RegexParser {
 public:
  RegexParser(std::string_view s, const RegexOptions& o) : s_(s), o_(o) {}

  Node run() {
    if (p_ < s_.size() && s_[p_] == '^') ++p_;
    Node n = alternatives(0);
    if (p_ < s_.size()) fail(s_[p_] == ')' ? "an unmatched ')'" : "unexpected '" + std::string(1, s_[p_]) + "'");
    return n;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw GrammarError("pattern: " + what + " at offset " + std::to_string(p_));
  }
  bool at_end_anchor() const {  // $ (or \Z, \z) closing the pattern or a top-level alternative
    return p_ < s_.size() && s_[p_] == '$';
  }
  Node alternatives(int depth) {
    if (depth > kMaxNesting) fail("groups nested too deeply");
    std::vector<Node> alts;
    alts.push_back(sequence(depth));
    while (p_ < s_.size() && s_[p_] == '|') {
      ++p_;
      alts.push_back(sequence(depth));
    }
    return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
  }
  Node sequence(int depth) {
    std::vector<Node> items;
    while (p_ < s_.size() && s_[p_] != '|' && s_[p_] != ')') {
      if (at_end_anchor()) {
        ++p_;
        if (p_ < s_.size() && s_[p_] != '|' && s_[p_] != ')') fail("'$' inside the pattern is not supported");
        break;
      }
      if (s_[p_] == '^') {
        if (items.empty() && depth == 0) {
          ++p_;
          continue;
        }
        fail("'^' inside the pattern is not supported");
      }
      Node atom = this->atom(depth);
      while (p_ < s_.size()) {
        int32_t lo = 0, hi = -1;
        const char c = s_[p_];
        if (c == '*') {
          ++p_;
        } else if (c == '+') {
          lo = 1;
          ++p_;
        } else if (c == '?') {
          hi = 1;
          ++p_;
        } else if (c == '{' && braces(&lo, &hi)) {
        } else {
          break;
        }
        if (p_ < s_.size() && (s_[p_] == '?' || s_[p_] == '+')) ++p_;  // lazy or possessive: same language
        atom = repeat(std::move(atom), lo, hi);
      }
      items.push_back(std::move(atom));
    }
    return seq(std::move(items));
  }
  // {m}, {m,}, {m,n}; false (and p_ unchanged) when the brace is a literal, as Python reads it.
  bool braces(int32_t* lo, int32_t* hi) {
    size_t q = p_ + 1;
    auto num = [&](int32_t* out) {
      const size_t b = q;
      int64_t v = 0;
      while (q < s_.size() && std::isdigit(static_cast<unsigned char>(s_[q]))) {
        v = v * 10 + (s_[q++] - '0');
        if (v > 1'000'000) fail("a repetition count over 1000000");
      }
      *out = static_cast<int32_t>(v);
      return q > b;
    };
    int32_t a = 0, b = -1;
    const bool has_a = num(&a);
    if (q < s_.size() && s_[q] == ',') {
      ++q;
      if (!num(&b)) b = -1;
      if (!has_a) a = 0;
    } else {
      if (!has_a) return false;
      b = a;
    }
    if (q >= s_.size() || s_[q] != '}') return false;
    if (b >= 0 && b < a) fail("a repetition {m,n} with n below m");
    p_ = q + 1;
    *lo = a;
    *hi = b;
    return true;
  }
  Node atom(int depth) {
    const char c = s_[p_];
    if (c == '(') {
      ++p_;
      if (p_ < s_.size() && s_[p_] == '?') {
        ++p_;
        if (p_ < s_.size() && s_[p_] == ':') {
          ++p_;
        } else if (p_ < s_.size() && (s_[p_] == 'P' || s_[p_] == '<') &&
                   !(s_[p_] == '<' && p_ + 1 < s_.size() && (s_[p_ + 1] == '=' || s_[p_ + 1] == '!'))) {
          if (s_[p_] == 'P') ++p_;
          if (p_ >= s_.size() || s_[p_] != '<') fail("only (?P<name>...) named groups are supported");
          while (p_ < s_.size() && s_[p_] != '>') ++p_;
          if (p_ >= s_.size()) fail("an unterminated group name");
          ++p_;
        } else {
          fail("look-around and inline flags are not supported");
        }
      }
      Node inner = alternatives(depth + 1);
      if (p_ >= s_.size() || s_[p_] != ')') fail("an unclosed '('");
      ++p_;
      return inner;
    }
    if (c == '[') return klass();
    if (c == '.') {
      ++p_;
      return set({{'\n', '\n'}}, true);
    }
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat");
    if (c == '\\') {
      std::vector<CharRange> r;
      bool negate = false;
      if (class_escape(&r, &negate)) return set(r, negate);
      return set({{single_escape(), 0}}, false, true);
    }
    uint32_t cp = 0;
    const size_t n = decode_utf8(s_.substr(p_), &cp);
    if (n == 0) fail("invalid UTF-8");
    p_ += n;
    return set({{cp, cp}});
  }
  // \d \w \s and their negations (p_ at the backslash); false when it is another escape.
  bool class_escape(std::vector<CharRange>* r, bool* negate) {
    if (p_ + 1 >= s_.size()) fail("a lone backslash at the end");
    const char e = s_[p_ + 1];
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(e)));
    if (lower != 'd' && lower != 'w' && lower != 's') return false;
    p_ += 2;
    *r = lower == 'd' ? digit_set() : lower == 'w' ? word_set() : space_set();
    *negate = e != lower;
    return true;
  }
  // One escaped character (p_ at the backslash).
  uint32_t single_escape() {
    const char e = s_[p_ + 1];
    p_ += 2;
    switch (e) {
      case 'n': return '\n';
      case 't': return '\t';
      case 'r': return '\r';
      case 'f': return '\f';
      case 'v': return '\v';
      case '0': return 0;
      case 'x': return hex(2);
      case 'u':
        if (p_ < s_.size() && s_[p_] == '{') {
          ++p_;
          uint32_t v = 0;
          int n = 0;
          while (p_ < s_.size() && s_[p_] != '}') {
            v = v * 16 + digit();
            if (++n > 6) fail("a \\u{...} escape too long");
          }
          if (p_ >= s_.size() || n == 0) fail("an unterminated \\u{...} escape");
          ++p_;
          return check(v);
        }
        return hex(4);
      case 'b': case 'B': fail("word boundaries are not supported");
      case 'A': case 'Z': case 'z': fail("anchors inside the pattern are not supported");
      default:
        if (std::isdigit(static_cast<unsigned char>(e))) fail("backreferences are not supported");
        if (std::isalpha(static_cast<unsigned char>(e))) fail(std::string("the escape \\") + e + " is not supported");
        if (static_cast<unsigned char>(e) >= 0x80) fail("an escape of a non-ASCII character");
        return static_cast<unsigned char>(e);
    }
  }
  uint32_t digit() {
    if (p_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[p_]))) fail("expected a hex digit");
    const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(s_[p_++])));
    return static_cast<uint32_t>(c <= '9' ? c - '0' : c - 'a' + 10);
  }
  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) v = v * 16 + digit();
    return check(v);
  }
  uint32_t check(uint32_t v) const {
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) fail("an escape that is no Unicode character");
    return v;
  }
  Node klass() {
    ++p_;
    bool negate = false;
    if (p_ < s_.size() && s_[p_] == '^') {
      negate = true;
      ++p_;
    }
    std::vector<CharRange> ranges;
    bool first = true;
    while (true) {
      if (p_ >= s_.size()) fail("an unterminated character class");
      if (s_[p_] == ']' && !first) break;
      first = false;
      if (s_[p_] == '[' && p_ + 1 < s_.size() && s_[p_ + 1] == ':') fail("POSIX classes are not supported");
      std::vector<CharRange> sub;
      bool sub_negate = false;
      if (s_[p_] == '\\' && class_escape(&sub, &sub_negate)) {
        for (const CharRange& x : normalize_ranges(sub, sub_negate)) ranges.push_back(x);
        continue;
      }
      const uint32_t lo = class_char();
      uint32_t hi = lo;
      if (p_ + 1 < s_.size() && s_[p_] == '-' && s_[p_ + 1] != ']') {
        ++p_;
        if (s_[p_] == '\\' && p_ + 1 < s_.size() && std::strchr("dwsDWS", s_[p_ + 1])) fail("a range to a class");
        hi = class_char();
        if (hi < lo) fail("a character range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++p_;
    return set(ranges, negate);
  }
  uint32_t class_char() {
    if (s_[p_] == '\\') {
      if (p_ + 1 >= s_.size()) fail("a lone backslash");
      if (s_[p_ + 1] == 'b') {  // backspace inside a class
        p_ += 2;
        return '\b';
      }
      return single_escape();
    }
    uint32_t cp = 0;
    const size_t n = decode_utf8(s_.substr(p_), &cp);
    if (n == 0) fail("invalid UTF-8");
    p_ += n;
    return cp;
  }
  // A code point set as a node: a class, or in a JSON string the escaped forms.
  Node set(std::vector<CharRange> r, bool negate = false, bool single = false) {
    if (single) r[0].hi = r[0].lo;
    std::vector<CharRange> norm = normalize_ranges(std::move(r), negate);
    if (norm.empty()) fail("a class that matches no character");
    if (o_.json_string) return json_string_chars(norm);
    return chars(norm);
  }

  std::string_view s_;
  const RegexOptions& o_;
  size_t p_ = 0;
};

}  // namespace

Node json_string_chars(const std::vector<CharRange>& set) {
  std::vector<Node> alts;
  std::vector<CharRange> plain;
  auto escaped = [&](uint32_t c) -> std::string {
    switch (c) {
      case '"': return "\\\"";
      case '\\': return "\\\\";
      case '\n': return "\\n";
      case '\t': return "\\t";
      case '\r': return "\\r";
      case '\b': return "\\b";
      case '\f': return "\\f";
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
        return buf;
      }
    }
  };
  for (const CharRange& r : set) {
    for (uint32_t lo = r.lo; lo <= r.hi;) {
      const bool special = lo < 0x20 || lo == '"' || lo == '\\';
      if (special) {
        alts.push_back(lit(escaped(lo)));
        ++lo;
        continue;
      }
      uint32_t hi = lo;  // the run up to the next special character
      while (hi < r.hi && !(hi + 1 < 0x20 || hi + 1 == '"' || hi + 1 == '\\')) ++hi;
      plain.push_back({lo, hi});
      lo = hi + 1;
    }
  }
  if (!plain.empty()) alts.insert(alts.begin(), chars(plain));
  return alt(std::move(alts));
}

Node parse_regex(std::string_view pattern, const RegexOptions& options) { return RegexParser(pattern, options).run(); }

}  // namespace kvserve::grammar
