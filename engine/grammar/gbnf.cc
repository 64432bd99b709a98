#include "grammar/gbnf.h"

#include <cctype>

#include "grammar/escapes.h"

namespace kvserve::grammar {
namespace {

constexpr int kMaxNesting = 256;

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view s) : s_(s) {}

  RuleSet run() {
    space(true);
    while (p_ < s_.size()) {
      const std::string name = word();
      if (name.empty()) fail("expected a rule name");
      space(false);
      if (s_.substr(p_, 3) != "::=") fail("expected '::=' after '" + name + "'");
      p_ += 3;
      space(true);
      Node body = alternatives(0);
      if (rules_.has(name)) fail("rule '" + name + "' is defined twice");
      rules_.add(name, std::move(body));
      if (p_ < s_.size()) {
        if (s_[p_] == '\r') ++p_;
        if (p_ < s_.size() && s_[p_] != '\n') fail("expected the end of the line");
        if (p_ < s_.size()) ++p_;
      }
      space(true);
    }
    if (!rules_.has("root")) throw GrammarError("grammar: no rule named 'root'");
    return std::move(rules_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw GrammarError("grammar: " + what + " at line " + std::to_string(line) + ", column " + std::to_string(col));
  }
  void space(bool newlines) {
    while (p_ < s_.size()) {
      const char c = s_[p_];
      if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) {
        ++p_;
      } else if (c == '#') {
        while (p_ < s_.size() && s_[p_] != '\n' && s_[p_] != '\r') ++p_;
      } else {
        break;
      }
    }
  }
  std::string word() {
    const size_t b = p_;
    while (p_ < s_.size() && word_char(s_[p_])) ++p_;
    return std::string(s_.substr(b, p_ - b));
  }
  Node alternatives(int depth) {
    if (depth > kMaxNesting) fail("groups nested too deeply");
    std::vector<Node> alts;
    alts.push_back(sequence(depth));
    while (p_ < s_.size() && s_[p_] == '|') {
      ++p_;
      space(true);
      alts.push_back(sequence(depth));
    }
    return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
  }
  Node sequence(int depth) {
    std::vector<Node> items;
    const bool nested = depth > 0;
    while (p_ < s_.size()) {
      const char c = s_[p_];
      Node item;
      if (c == '"') {
        ++p_;
        std::string text;
        while (true) {
          if (p_ >= s_.size()) fail("unterminated string");
          if (s_[p_] == '"') break;
          append_utf8(text, read_char());
        }
        ++p_;
        item = lit(std::move(text));
      } else if (c == '[') {
        ++p_;
        const bool negate = p_ < s_.size() && s_[p_] == '^';
        if (negate) ++p_;
        std::vector<CharRange> ranges;
        while (true) {
          if (p_ >= s_.size()) fail("unterminated character class");
          if (s_[p_] == ']') break;
          const uint32_t lo = read_char();
          uint32_t hi = lo;
          if (p_ + 1 < s_.size() && s_[p_] == '-' && s_[p_ + 1] != ']') {
            ++p_;
            hi = read_char();
          }
          if (hi < lo) fail("a character range out of order");
          ranges.push_back({lo, hi});
        }
        ++p_;
        try {
          item = chars(std::move(ranges), negate);
        } catch (const GrammarError& e) {
          fail(e.what());
        }
      } else if (c == '.') {
        ++p_;
        item = chars({}, true);
      } else if (c == '(') {
        ++p_;
        space(true);
        item = alternatives(depth + 1);
        if (p_ >= s_.size() || s_[p_] != ')') fail("expected ')'");
        ++p_;
      } else if (word_char(c)) {
        item = ref(word());
      } else if (c == '<') {
        fail("token references (<...>) are not supported");
      } else {
        break;
      }
      space(nested);
      while (p_ < s_.size() && (s_[p_] == '*' || s_[p_] == '+' || s_[p_] == '?' || s_[p_] == '{')) {
        const char op = s_[p_++];
        int32_t lo = 0, hi = -1;
        if (op == '+') lo = 1;
        if (op == '?') hi = 1;
        if (op == '{') {
          space(nested);
          lo = number();
          space(nested);
          hi = lo;
          if (p_ < s_.size() && s_[p_] == ',') {
            ++p_;
            space(nested);
            hi = p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_])) ? number() : -1;
            space(nested);
          }
          if (p_ >= s_.size() || s_[p_] != '}') fail("expected '}'");
          ++p_;
          if (hi >= 0 && hi < lo) fail("a repetition {m,n} with n below m");
        }
        item = repeat(std::move(item), lo, hi);
        space(nested);
      }
      items.push_back(std::move(item));
    }
    return seq(std::move(items));
  }
  int32_t number() {
    const size_t b = p_;
    int64_t v = 0;
    while (p_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p_]))) {
      v = v * 10 + (s_[p_++] - '0');
      if (v > 1'000'000) fail("a repetition count over 1000000");
    }
    if (p_ == b) fail("expected a number");
    return static_cast<int32_t>(v);
  }
  // One character of a literal or class: an escape or a UTF-8 character.
  uint32_t read_char() {
    if (s_[p_] == '\\') {
      if (p_ + 1 >= s_.size()) fail("a lone backslash");
      const char e = s_[p_ + 1];
      p_ += 2;
      switch (e) {
        case 'n': return '\n';
        case 'r': return '\r';
        case 't': return '\t';
        case '0': return 0;
        case 'x': return hex(2);
        case 'u': return hex(4);
        case 'U': return hex(8);
        default:
          if (static_cast<unsigned char>(e) < 0x80) return static_cast<unsigned char>(e);
          fail("an escape of a non-ASCII character");
      }
    }
    uint32_t cp = 0;
    const size_t n = decode_utf8(s_.substr(p_), &cp);
    if (n == 0) fail("invalid UTF-8");
    p_ += n;
    return cp;
  }
  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i, ++p_) {
      if (p_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[p_]))) fail("expected a hex digit");
      const char c = static_cast<char>(std::tolower(static_cast<unsigned char>(s_[p_])));
      v = v * 16 + static_cast<uint32_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (v > kMaxCodePoint || (v >= 0xD800 && v <= 0xDFFF)) fail("an escape that is no Unicode character");
    return v;
  }

  std::string_view s_;
  size_t p_ = 0;
  RuleSet rules_;
};

}  // namespace

RuleSet parse_gbnf(std::string_view text) { return GbnfParser(text).run(); }

}  // namespace kvserve::grammar
