// Template text to nodes: tags found (string-aware), whitespace control applied as Jinja's
// lexer applies it (`-` strips all whitespace on that side; trim_blocks drops the newline after
// a block or comment tag; lstrip_blocks drops the spaces and tabs before one at the start of a
// line), then each tag's tokens parsed by recursive descent with Jinja's precedence.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

#include "text/jinja/jinja_ast.h"

namespace kvserve::jinja {
namespace {

// Far beyond any real template (a few levels of blocks, chains of a few dozen), and far from
// the stack's end when a template file is hostile.
constexpr int kMaxNesting = 64;
constexpr int kMaxExprDepth = 256;

struct Segment {
  enum class Type { kText, kOutput, kBlock, kComment } type;
  std::string text;
  size_t pos = 0;  // where it starts in the source
  int line = 1;
  bool strip_before = false, strip_after = false, keep_before = false, keep_after = false;
};

[[noreturn]] void fail(int line, const std::string& what) {
  throw JinjaError("template line " + std::to_string(line) + ": " + what);
}

std::vector<Segment> segments(const std::string& src) {
  std::vector<Segment> out;
  size_t pos = 0;
  int line = 1;
  const auto count_lines = [&](size_t from, size_t to) {
    for (size_t k = from; k < to; ++k) line += src[k] == '\n';
  };
  while (pos < src.size()) {
    size_t open = src.find('{', pos);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' && src[open + 1] != '%' &&
           src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open == std::string::npos || open + 1 >= src.size()) {
      out.push_back({Segment::Type::kText, src.substr(pos), pos, line});
      break;
    }
    if (open > pos) out.push_back({Segment::Type::kText, src.substr(pos, open - pos), pos, line});
    count_lines(pos, open);
    const char kind = src[open + 1];
    Segment seg{kind == '{' ? Segment::Type::kOutput : kind == '%' ? Segment::Type::kBlock : Segment::Type::kComment,
                "", open, line};
    size_t body = open + 2;
    if (body < src.size() && (src[body] == '-' || src[body] == '+')) {
      (src[body] == '-' ? seg.strip_before : seg.keep_before) = true;
      ++body;
    }
    const std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t end = body;
    if (seg.type == Segment::Type::kComment) {
      end = src.find(close, body);
    } else {  // skip quoted strings: a '}}' inside one does not close the tag
      char quote = 0;
      for (; end < src.size(); ++end) {
        const char c = src[end];
        if (quote) {
          if (c == '\\') ++end;
          else if (c == quote) quote = 0;
        } else if (c == '\'' || c == '"') {
          quote = c;
        } else if (src.compare(end, 2, close) == 0) {
          break;
        }
      }
      if (end >= src.size()) end = std::string::npos;
    }
    if (end == std::string::npos) fail(line, "unclosed tag");
    size_t content_end = end;
    if (content_end > body && (src[content_end - 1] == '-' || src[content_end - 1] == '+')) {
      (src[content_end - 1] == '-' ? seg.strip_after : seg.keep_after) = true;
      --content_end;
    }
    seg.text = src.substr(body, content_end - body);
    out.push_back(seg);
    count_lines(open, end + 2);
    pos = end + 2;
  }
  // Whitespace control on the text around each tag.
  for (size_t k = 0; k < out.size(); ++k) {
    Segment& t = out[k];
    if (t.type != Segment::Type::kText) continue;
    const Segment* prev = k > 0 ? &out[k - 1] : nullptr;
    const Segment* next = k + 1 < out.size() ? &out[k + 1] : nullptr;
    size_t begin = 0, end = t.text.size();
    if (next && next->strip_before) {
      while (end > 0 && std::isspace(static_cast<unsigned char>(t.text[end - 1]))) --end;
    } else if (next && next->type != Segment::Type::kOutput && !next->keep_before) {
      size_t run = end;
      while (run > 0 && (t.text[run - 1] == ' ' || t.text[run - 1] == '\t')) --run;
      if ((run > 0 && t.text[run - 1] == '\n') || (run == 0 && (t.pos == 0 || src[t.pos - 1] == '\n'))) end = run;
    }
    if (prev && prev->strip_after) {
      while (begin < end && std::isspace(static_cast<unsigned char>(t.text[begin]))) ++begin;
    } else if (prev && prev->type != Segment::Type::kOutput && !prev->keep_after) {
      if (t.text.compare(begin, 1, "\n") == 0) ++begin;
      else if (t.text.compare(begin, 2, "\r\n") == 0) begin += 2;
    }
    t.text = begin < end ? t.text.substr(begin, end - begin) : "";
  }
  return out;
}

struct Token {
  enum class Type { kName, kInt, kFloat, kString, kOp, kEnd } type;
  std::string text;
  int64_t i = 0;
  double f = 0;
};

std::vector<Token> tokenize(const std::string& s, int line) {
  std::vector<Token> out;
  static const char* ops[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=",
                              "(", ")", "[", "]", "{", "}", ".", ",", ":", "|"};
  for (size_t k = 0; k < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[k]);
    if (std::isspace(c)) {
      ++k;
    } else if (std::isalpha(c) || c == '_') {
      size_t e = k;
      while (e < s.size() && (std::isalnum(static_cast<unsigned char>(s[e])) || s[e] == '_')) ++e;
      out.push_back({Token::Type::kName, s.substr(k, e - k)});
      k = e;
    } else if (std::isdigit(c)) {
      size_t e = k;
      while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
      if (e + 1 < s.size() && s[e] == '.' && std::isdigit(static_cast<unsigned char>(s[e + 1]))) {
        ++e;
        while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
        double f = 0;
        if (std::from_chars(s.data() + k, s.data() + e, f).ec != std::errc()) fail(line, "number out of range");
        out.push_back({Token::Type::kFloat, s.substr(k, e - k), 0, f});
      } else {
        int64_t i = 0;
        if (std::from_chars(s.data() + k, s.data() + e, i).ec != std::errc()) fail(line, "integer out of range");
        out.push_back({Token::Type::kInt, s.substr(k, e - k), i});
      }
      k = e;
    } else if (c == '\'' || c == '"') {
      std::string v;
      size_t e = k + 1;
      for (; e < s.size() && s[e] != static_cast<char>(c); ++e) {
        if (s[e] == '\\' && e + 1 < s.size()) {
          const char n = s[++e];
          v += n == 'n' ? '\n' : n == 't' ? '\t' : n == 'r' ? '\r' : n;
        } else {
          v += s[e];
        }
      }
      if (e >= s.size()) fail(line, "unterminated string");
      out.push_back({Token::Type::kString, v});
      k = e + 1;
    } else {
      bool found = false;
      for (const char* op : ops)
        if (s.compare(k, std::char_traits<char>::length(op), op) == 0) {
          out.push_back({Token::Type::kOp, op});
          k += std::char_traits<char>::length(op);
          found = true;
          break;
        }
      if (!found) fail(line, std::string("unexpected character '") + s[k] + "'");
    }
  }
  out.push_back({Token::Type::kEnd, ""});
  return out;
}

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line) : t_(std::move(tokens)), line_(line) {}

  bool at_end() const { return t_[p_].type == Token::Type::kEnd; }
  bool is_name(const char* n) const { return t_[p_].type == Token::Type::kName && t_[p_].text == n; }
  bool is_op(const char* o) const { return t_[p_].type == Token::Type::kOp && t_[p_].text == o; }
  std::string name() {
    if (t_[p_].type != Token::Type::kName) fail(line_, "expected a name, got '" + t_[p_].text + "'");
    return t_[p_++].text;
  }
  void expect_op(const char* o) {
    if (!is_op(o)) fail(line_, std::string("expected '") + o + "', got '" + t_[p_].text + "'");
    ++p_;
  }
  void expect_end() {
    if (!at_end()) fail(line_, "unexpected '" + t_[p_].text + "'");
  }

  ExprP expr() {  // with the conditional: a if c else b
    Nest nest(*this);
    ExprP e = or_expr();
    if (is_name("if")) {
      ++p_;
      ExprP cond = or_expr();
      ExprP other;
      if (is_name("else")) {
        ++p_;
        other = expr();
      }
      return make(Expr::Kind::kCond, "", {cond, e, other});
    }
    return e;
  }
  ExprP or_expr() {
    ExprP e = and_expr();
    while (is_name("or")) {
      ++p_;
      e = make(Expr::Kind::kBinary, "or", {e, and_expr()});
    }
    return e;
  }

 private:
  ExprP make(Expr::Kind k, std::string op, std::vector<ExprP> a) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->op = std::move(op);
    e->a = std::move(a);
    e->line = line_;
    for (const ExprP& x : e->a) deepen(*e, x);
    return e;
  }
  // A chain (a ~ b ~ c ..., x|f|g..., a.b.c...) is built in a loop, not by recursion, but
  // evaluating it recurses as deep as the tree: its depth is bounded here.
  void deepen(Expr& e, const ExprP& child) {
    if (!child) return;
    e.depth = std::max(e.depth, child->depth + 1);
    if (e.depth > kMaxExprDepth) fail(line_, "expression nested deeper than " + std::to_string(kMaxExprDepth));
  }
  // Parsing recurses once per bracket, `not` or sign: bounded, so a hostile template cannot
  // exhaust the stack.
  struct Nest {
    explicit Nest(ExprParser& p) : p_(p) {
      if (++p_.nest_ > kMaxNesting) fail(p_.line_, "expression nested deeper than " + std::to_string(kMaxNesting));
    }
    ~Nest() { --p_.nest_; }
    ExprParser& p_;
  };
  ExprP and_expr() {
    ExprP e = not_expr();
    while (is_name("and")) {
      ++p_;
      e = make(Expr::Kind::kBinary, "and", {e, not_expr()});
    }
    return e;
  }
  ExprP not_expr() {
    if (is_name("not")) {
      Nest nest(*this);
      ++p_;
      return make(Expr::Kind::kUnary, "not", {not_expr()});
    }
    return compare();
  }
  ExprP compare() {
    ExprP e = concat();
    for (;;) {
      std::string op;
      for (const char* o : {"==", "!=", "<=", ">=", "<", ">"})
        if (is_op(o)) op = o;
      if (!op.empty()) {
        ++p_;
      } else if (is_name("in")) {
        ++p_;
        op = "in";
      } else if (is_name("not") && t_[p_ + 1].type == Token::Type::kName && t_[p_ + 1].text == "in") {
        p_ += 2;
        op = "notin";
      } else {
        return e;
      }
      e = make(Expr::Kind::kBinary, op, {e, concat()});
    }
  }
  ExprP concat() {
    ExprP e = additive();
    while (is_op("~")) {
      ++p_;
      e = make(Expr::Kind::kBinary, "~", {e, additive()});
    }
    return e;
  }
  ExprP additive() {
    ExprP e = multiplicative();
    while (is_op("+") || is_op("-")) {
      const std::string op = t_[p_++].text;
      e = make(Expr::Kind::kBinary, op, {e, multiplicative()});
    }
    return e;
  }
  ExprP multiplicative() {
    ExprP e = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = t_[p_++].text;
      e = make(Expr::Kind::kBinary, op, {e, power()});
    }
    return e;
  }
  ExprP power() {
    ExprP e = unary();
    while (is_op("**")) {
      ++p_;
      e = make(Expr::Kind::kBinary, "**", {e, unary()});
    }
    return e;
  }
  ExprP unary() {
    if (is_op("-") || is_op("+")) {
      Nest nest(*this);
      const std::string op = t_[p_++].text;
      return make(Expr::Kind::kUnary, op, {unary()});
    }
    return postfix(primary());
  }
  void call_args(Expr& e) {  // after '(' up to and including ')'
    while (!is_op(")")) {
      if (t_[p_].type == Token::Type::kName && t_[p_ + 1].type == Token::Type::kOp && t_[p_ + 1].text == "=") {
        const std::string key = t_[p_].text;
        p_ += 2;
        e.kwargs.emplace_back(key, expr());
        deepen(e, e.kwargs.back().second);
      } else {
        e.a.push_back(expr());
        deepen(e, e.a.back());
      }
      if (!is_op(")")) expect_op(",");
    }
    ++p_;
  }
  ExprP postfix(ExprP e) {
    for (;;) {
      if (is_op(".")) {
        ++p_;
        auto n = std::const_pointer_cast<Expr>(make(Expr::Kind::kAttr, "", {e}));
        n->name = name();
        e = n;
      } else if (is_op("[")) {
        ++p_;
        ExprP parts[3];
        int n = 0;
        bool slice = false;
        for (;;) {
          if (is_op("]")) break;
          if (is_op(":")) {
            ++p_;
            slice = true;
            if (++n > 2) fail(line_, "too many ':' in a slice");
            continue;
          }
          if (parts[n]) fail(line_, "expected ':' or ']' in a subscript");
          parts[n] = expr();
        }
        ++p_;
        if (!slice && !parts[0]) fail(line_, "empty subscript []");
        e = slice ? make(Expr::Kind::kSlice, "", {e, parts[0], parts[1], parts[2]})
                  : make(Expr::Kind::kIndex, "", {e, parts[0]});
      } else if (is_op("(")) {
        ++p_;
        auto call = std::const_pointer_cast<Expr>(make(Expr::Kind::kCall, "", {e}));
        call_args(*call);
        e = call;
      } else if (is_op("|")) {
        ++p_;
        auto f = std::const_pointer_cast<Expr>(make(Expr::Kind::kFilter, "", {e}));
        f->name = name();
        if (is_op("(")) {
          ++p_;
          call_args(*f);
        }
        e = f;
      } else if (is_name("is")) {
        ++p_;
        auto test = std::const_pointer_cast<Expr>(make(Expr::Kind::kTest, "", {e}));
        if (is_name("not")) {
          ++p_;
          test->op = "not";
        }
        test->name = name();
        if (is_op("(")) {
          ++p_;
          call_args(*test);
        } else if (t_[p_].type == Token::Type::kString || t_[p_].type == Token::Type::kInt ||
                   t_[p_].type == Token::Type::kFloat || is_name("none") || is_name("true") || is_name("false")) {
          test->a.push_back(primary());  // `is sameas false`, `is equalto 3`
          deepen(*test, test->a.back());
        }
        e = test;
      } else {
        return e;
      }
    }
  }
  ExprP literal(Value v) {
    auto e = std::const_pointer_cast<Expr>(make(Expr::Kind::kLiteral, "", {}));
    e->value = std::move(v);
    return e;
  }
  ExprP primary() {
    const Token t = t_[p_];
    switch (t.type) {
      case Token::Type::kInt: ++p_; return literal(Value::integer(t.i));
      case Token::Type::kFloat: ++p_; return literal(Value::number(t.f));
      case Token::Type::kString: {
        ++p_;
        std::string s = t.text;
        while (t_[p_].type == Token::Type::kString) s += t_[p_++].text;  // adjacent literals join
        return literal(Value::string(s));
      }
      case Token::Type::kName: {
        ++p_;
        if (t.text == "true" || t.text == "True") return literal(Value::boolean(true));
        if (t.text == "false" || t.text == "False") return literal(Value::boolean(false));
        if (t.text == "none" || t.text == "None") return literal(Value::none());
        auto e = std::const_pointer_cast<Expr>(make(Expr::Kind::kName, "", {}));
        e->name = t.text;
        return e;
      }
      case Token::Type::kOp:
        if (t.text == "(") {
          ++p_;
          ExprP first = expr();
          if (is_op(")")) {
            ++p_;
            return first;
          }
          std::vector<ExprP> items = {first};
          while (is_op(",")) {
            ++p_;
            if (is_op(")")) break;
            items.push_back(expr());
          }
          expect_op(")");
          return make(Expr::Kind::kList, "", items);
        }
        if (t.text == "[") {
          ++p_;
          std::vector<ExprP> items;
          while (!is_op("]")) {
            items.push_back(expr());
            if (!is_op("]")) expect_op(",");
          }
          ++p_;
          return make(Expr::Kind::kList, "", items);
        }
        if (t.text == "{") {
          ++p_;
          std::vector<ExprP> items;
          while (!is_op("}")) {
            items.push_back(expr());
            expect_op(":");
            items.push_back(expr());
            if (!is_op("}")) expect_op(",");
          }
          ++p_;
          return make(Expr::Kind::kDict, "", items);
        }
        [[fallthrough]];
      default: fail(line_, "unexpected '" + t.text + "'");
    }
  }

  std::vector<Token> t_;
  size_t p_ = 0;
  int line_;
  int nest_ = 0;
};

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Segment> segs) : segs_(std::move(segs)) {}

  // Nodes up to one of `ends` (a block tag's first word); *end gets which, and its parser.
  std::vector<Node> block(const std::set<std::string>& ends, std::string* end, std::unique_ptr<ExprParser>* rest) {
    // Blocks inside blocks recurse here (and when rendered): bounded as expressions are.
    if (++depth_ > kMaxNesting)
      fail(k_ < segs_.size() ? segs_[k_].line : 1, "blocks nested deeper than " + std::to_string(kMaxNesting));
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    std::vector<Node> out;
    while (k_ < segs_.size()) {
      const Segment& s = segs_[k_++];
      if (s.type == Segment::Type::kText) {
        if (!s.text.empty()) {
          Node n{};
          n.kind = Node::Kind::kText;
          n.text = s.text;
          out.push_back(std::move(n));
        }
      } else if (s.type == Segment::Type::kOutput) {
        ExprParser p(tokenize(s.text, s.line), s.line);
        Node n{};
        n.kind = Node::Kind::kOutput;
        n.expr = p.expr();
        n.line = s.line;
        p.expect_end();
        out.push_back(std::move(n));
      } else if (s.type == Segment::Type::kBlock) {
        auto p = std::make_unique<ExprParser>(tokenize(s.text, s.line), s.line);
        const std::string word = p->name();
        if (ends.count(word)) {
          *end = word;
          *rest = std::move(p);
          return out;
        }
        out.push_back(statement(word, *p, s.line));
      }
    }
    if (!ends.empty()) fail(segs_.empty() ? 1 : segs_.back().line, "missing {% " + *ends.begin() + " %}");
    return out;
  }

 private:
  Node statement(const std::string& word, ExprParser& p, int line) {
    Node n{};
    n.line = line;
    if (word == "if") {
      n.kind = Node::Kind::kIf;
      ExprP cond = p.expr();
      p.expect_end();
      for (;;) {
        std::string end;
        std::unique_ptr<ExprParser> rest;
        std::vector<Node> body = block({"elif", "else", "endif"}, &end, &rest);
        n.branches.emplace_back(cond, std::move(body));
        if (end == "endif") break;
        if (end == "else") {
          std::string end2;
          std::unique_ptr<ExprParser> rest2;
          n.branches.emplace_back(nullptr, block({"endif"}, &end2, &rest2));
          break;
        }
        cond = rest->expr();
        rest->expect_end();
      }
    } else if (word == "for") {
      n.kind = Node::Kind::kFor;
      n.targets.push_back(p.name());
      while (p.is_op(",")) {
        p.expect_op(",");
        n.targets.push_back(p.name());
      }
      if (!p.is_name("in")) fail(line, "expected 'in' in a for tag");
      p.name();
      n.expr = p.or_expr();
      if (p.is_name("if")) {
        p.name();
        n.filter = p.or_expr();
      }
      p.expect_end();
      std::string end;
      std::unique_ptr<ExprParser> rest;
      n.body = block({"endfor", "else"}, &end, &rest);
      if (end == "else") n.else_body = block({"endfor"}, &end, &rest);
    } else if (word == "set") {
      n.kind = Node::Kind::kSet;
      n.target = p.name();
      if (p.is_op(".")) {
        p.expect_op(".");
        n.attr = p.name();
      }
      p.expect_op("=");
      n.expr = p.expr();
      p.expect_end();
    } else if (word == "macro") {
      n.kind = Node::Kind::kMacro;
      n.target = p.name();
      p.expect_op("(");
      while (!p.is_op(")")) {
        n.targets.push_back(p.name());
        ExprP def;
        if (p.is_op("=")) {
          p.expect_op("=");
          def = p.expr();
        }
        n.defaults.push_back(def);
        if (!p.is_op(")")) p.expect_op(",");
      }
      p.expect_op(")");
      p.expect_end();
      std::string end;
      std::unique_ptr<ExprParser> rest;
      n.body = block({"endmacro"}, &end, &rest);
    } else if (word == "break" || word == "continue") {
      n.kind = word == "break" ? Node::Kind::kBreak : Node::Kind::kContinue;
      p.expect_end();
    } else {
      fail(line, "unknown tag '" + word + "'");
    }
    return n;
  }

  std::vector<Segment> segs_;
  size_t k_ = 0;
  int depth_ = 0;
};

}  // namespace

std::vector<Node> parse_template(const std::string& source) {
  std::string src = source;
  if (!src.empty() && src.back() == '\n') src.pop_back();  // keep_trailing_newline=False
  TemplateParser parser(segments(src));
  std::string end;
  std::unique_ptr<ExprParser> rest;
  return parser.block({}, &end, &rest);
}

}  // namespace kvserve::jinja
