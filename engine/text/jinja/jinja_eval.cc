// Rendering: scopes (a for loop opens one; `set` writes to the innermost, as Jinja's scoping
// does, hence namespace()), expressions with Python's semantics where templates rely on them
// (`or` returns an operand, negative indices, slices), and the filters, tests, string and dict
// methods and globals chat templates use.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "text/jinja/jinja.h"
#include "text/jinja/jinja_ast.h"

namespace kvserve::jinja {
namespace {

using K = Value::Kind;

[[noreturn]] void fail(const Expr& e, const std::string& what) {
  throw JinjaError("template line " + std::to_string(e.line) + ": " + what);
}

// Bounds on one render, so that no template (a fuzzer's, or a model file's) runs away.
constexpr int64_t kMaxIterations = 1000000;
constexpr size_t kMaxOutputBytes = 16 << 20;
// Macro calls nested deeper than this are refused: a macro that calls itself without end (or a
// template file built to) ends in an error, not at the end of the stack.
constexpr int kMaxMacroDepth = 32;
constexpr size_t kMaxValueBytes = 32 << 20;
constexpr int64_t kMaxTextBytes = int64_t{1} << 30;
constexpr size_t kMaxListItems = 1000000;
// Each nested line of tojson repeats the indent: a huge one is memory, never a layout.
constexpr int64_t kMaxJsonIndent = 64;

struct LoopSignal {
  enum { kNone, kBreak, kContinue } kind = kNone;
};

int64_t as_int(const Expr& e, const Value& v) {
  if (v.is(K::kInt)) return v.i;
  if (v.is(K::kBool)) return v.b;
  if (v.is(K::kFloat)) {
    if (!(std::fabs(v.f) < 9.2e18)) fail(e, "float out of integer range");
    return static_cast<int64_t>(v.f);
  }
  fail(e, std::string("expected an integer, got ") + v.type_name());
}

// Python's index normalisation for v[i] and slices.
int64_t norm_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

std::string strip(const std::string& s, const std::string& chars, bool left, bool right) {
  const std::string ws = chars.empty() ? " \t\n\r\f\v" : chars;
  size_t b = 0, e = s.size();
  if (left)
    while (b < e && ws.find(s[b]) != std::string::npos) ++b;
  if (right)
    while (e > b && ws.find(s[e - 1]) != std::string::npos) --e;
  return s.substr(b, e - b);
}

Value items_of(const Value& d) {
  List out;
  for (const auto& [k, v] : *d.dict) out.push_back(Value::of_list({Value::string(k), v}));
  return Value::of_list(std::move(out));
}

// Where each character of s starts (and, last, s.size()): strings index, slice and count by
// character as Python's do. A malformed byte counts as one character.
std::vector<size_t> char_starts(const std::string& s) {
  std::vector<size_t> starts;
  for (size_t k = 0; k < s.size();) {
    starts.push_back(k);
    const unsigned char c = static_cast<unsigned char>(s[k]);
    k += std::min<size_t>(c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1, s.size() - k);
  }
  starts.push_back(s.size());
  return starts;
}

// The elements a for loop or a filter walks: a list's items, a dict's keys, a string's characters.
List iterate(const Expr& e, const Value& v) {
  if (v.is(K::kList)) return *v.list;
  if (v.is(K::kDict)) {
    List keys;
    for (const auto& kv : *v.dict) keys.push_back(Value::string(kv.first));
    return keys;
  }
  if (v.is(K::kString)) {  // whole UTF-8 characters
    const std::vector<size_t> at = char_starts(v.s);
    if (at.size() - 1 > kMaxListItems) fail(e, "iterating a string of more than a million characters");
    List chars;
    for (size_t k = 0; k + 1 < at.size(); ++k) chars.push_back(Value::string(v.s.substr(at[k], at[k + 1] - at[k])));
    return chars;
  }
  if (!v.defined()) return {};
  // Python's words, which templates' callers (and tests against Jinja2) see.
  static const char* py[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list", "dict", "function"};
  fail(e, std::string("'") + py[static_cast<int>(v.kind)] + "' object is not iterable");
}

class Renderer {
 public:
  Renderer(const Value& context, std::time_t now) : now_(now) {
    scopes_.emplace_back();
    if (context.is(K::kDict))
      for (const auto& [k, v] : *context.dict) scopes_.back()[k] = v;
  }

  void render(const std::vector<Node>& nodes, std::string& out, LoopSignal& sig) {
    for (const Node& n : nodes) {
      if (sig.kind != LoopSignal::kNone) return;
      if (out.size() > kMaxOutputBytes) throw JinjaError("template output exceeds 16 MiB");
      switch (n.kind) {
        case Node::Kind::kText: out += n.text; break;
        case Node::Kind::kOutput: out += eval(*n.expr).to_string(); break;
        case Node::Kind::kIf:
          for (const auto& [cond, body] : n.branches)
            if (!cond || eval(*cond).truthy()) {
              render(body, out, sig);
              break;
            }
          break;
        case Node::Kind::kFor: render_for(n, out, sig); break;
        case Node::Kind::kSet:
          if (n.attr.empty()) {
            scopes_.back()[n.target] = eval(*n.expr);
          } else {
            Value ns = lookup(n.target);
            if (!ns.is(K::kDict)) fail(*n.expr, "'" + n.target + "' is not a namespace");
            Value v = eval(*n.expr);
            // Values are shared: a namespace holding itself would be a cycle nothing frees.
            if (holds(v, ns.dict.get())) fail(*n.expr, "a namespace cannot hold itself");
            ns.set(n.attr, std::move(v));
          }
          break;
        case Node::Kind::kMacro: scopes_.back()[n.target] = macro(n); break;
        case Node::Kind::kBreak: sig.kind = LoopSignal::kBreak; return;
        case Node::Kind::kContinue: sig.kind = LoopSignal::kContinue; return;
      }
    }
  }

 private:
  static bool holds(const Value& v, const Dict* target) {
    if (v.is(K::kDict)) {
      if (v.dict.get() == target) return true;
      for (const auto& kv : *v.dict)
        if (holds(kv.second, target)) return true;
    } else if (v.is(K::kList)) {
      for (const Value& x : *v.list)
        if (holds(x, target)) return true;
    }
    return false;
  }

  // A macro is a function of its parameters that renders its body to a string. Like Jinja2's,
  // it sees the template's top-level names and its own arguments, not its caller's locals.
  Value macro(const Node& n) {
    const Node* node = &n;
    return Value::function([this, node](const Args& args, const Kwargs& kwargs) {
      if (args.size() > node->targets.size())
        throw JinjaError("macro '" + node->target + "' takes " + std::to_string(node->targets.size()) +
                         " arguments, " + std::to_string(args.size()) + " given");
      if (macro_depth_ >= kMaxMacroDepth)
        throw JinjaError("macro calls nested deeper than " + std::to_string(kMaxMacroDepth));
      std::map<std::string, Value> locals;
      for (size_t k = 0; k < node->targets.size(); ++k) {
        const std::string& param = node->targets[k];
        if (k < args.size()) {
          locals[param] = args[k];
          continue;
        }
        auto kw = std::find_if(kwargs.begin(), kwargs.end(), [&](const auto& p) { return p.first == param; });
        if (kw != kwargs.end()) locals[param] = kw->second;
        else if (node->defaults[k]) locals[param] = eval(*node->defaults[k]);
        else locals[param] = Value();
      }
      // The body runs over the top-level scope and its own (a set inside lands in the latter);
      // the caller's scopes come back however it ends.
      struct Frame {
        Renderer& r;
        std::vector<std::map<std::string, Value>> caller;
        Frame(Renderer& r, std::map<std::string, Value> locals) : r(r) {
          caller.swap(r.scopes_);
          r.scopes_ = {caller.front(), std::move(locals)};
          ++r.macro_depth_;
        }
        ~Frame() {
          --r.macro_depth_;
          r.scopes_.swap(caller);
        }
      } frame(*this, std::move(locals));
      std::string out;
      LoopSignal sig;
      render(node->body, out, sig);
      return Value::string(std::move(out));
    });
  }

  void render_for(const Node& n, std::string& out, LoopSignal& outer) {
    List items;
    for (const Value& v : iterate(*n.expr, eval(*n.expr))) {
      if (n.filter) {
        scopes_.emplace_back();
        bind(n, v);
        const bool keep = eval(*n.filter).truthy();
        scopes_.pop_back();
        if (!keep) continue;
      }
      items.push_back(v);
    }
    if (items.empty()) {
      render(n.else_body, out, outer);
      return;
    }
    const int64_t len = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < len; ++k) {
      if (++iterations_ > kMaxIterations) throw JinjaError("template loops exceed a million iterations");
      scopes_.emplace_back();
      bind(n, items[k]);
      scopes_.back()["loop"] = Value::of_dict({{"index", Value::integer(k + 1)},
                                               {"index0", Value::integer(k)},
                                               {"revindex", Value::integer(len - k)},
                                               {"revindex0", Value::integer(len - k - 1)},
                                               {"first", Value::boolean(k == 0)},
                                               {"last", Value::boolean(k == len - 1)},
                                               {"length", Value::integer(len)},
                                               {"previtem", k > 0 ? items[k - 1] : Value()},
                                               {"nextitem", k + 1 < len ? items[k + 1] : Value()}});
      LoopSignal sig;
      render(n.body, out, sig);
      scopes_.pop_back();
      if (sig.kind == LoopSignal::kBreak) break;
    }
  }

  void bind(const Node& n, const Value& v) {
    if (n.targets.size() == 1) {
      scopes_.back()[n.targets[0]] = v;
      return;
    }
    const List parts = v.is(K::kList) ? *v.list : List{};
    if (parts.size() != n.targets.size()) fail(*n.expr, "cannot unpack " + std::to_string(parts.size()) + " values");
    for (size_t k = 0; k < parts.size(); ++k) scopes_.back()[n.targets[k]] = parts[k];
  }

  Value lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (auto f = it->find(name); f != it->end()) return f->second;
    return global(name);
  }

  Value global(const std::string& name) const {
    if (name == "raise_exception")
      return Value::function([](const Args& a, const Kwargs&) -> Value {
        throw JinjaError(a.empty() ? "raise_exception" : a[0].to_string());
      });
    if (name == "strftime_now") {
      const std::time_t now = now_;
      return Value::function([now](const Args& a, const Kwargs&) {
        std::tm tm{};
        gmtime_r(&now, &tm);
        char buf[256];
        const size_t n = std::strftime(buf, sizeof(buf), a.empty() ? "%Y-%m-%d" : a[0].to_string().c_str(), &tm);
        return Value::string(std::string(buf, n));
      });
    }
    if (name == "namespace" || name == "dict")
      return Value::function([](const Args&, const Kwargs& kw) {
        Dict d(kw.begin(), kw.end());
        return Value::of_dict(std::move(d));
      });
    if (name == "range")
      return Value::function([](const Args& a, const Kwargs&) {
        int64_t start = 0, stop = 0, step = 1;
        if (a.size() == 1) stop = a[0].i;
        if (a.size() >= 2) start = a[0].i, stop = a[1].i;
        if (a.size() >= 3) step = a[2].i;
        List out;
        if (step == 0) throw JinjaError("range: step cannot be zero");
        for (int64_t k = start; step > 0 ? k < stop : k > stop;) {
          out.push_back(Value::integer(k));
          if (out.size() > 100000) throw JinjaError("range: too long");
          if (__builtin_add_overflow(k, step, &k)) break;
        }
        return Value::of_list(std::move(out));
      });
    return Value();
  }

  // Every value an expression computes passes here: text is bounded per value and in total,
  // so a template (a file is semi-trusted input) cannot double a string into gigabytes.
  Value eval(const Expr& e) {
    Value v = compute(e);
    if (v.is(K::kString)) {
      if (v.s.size() > kMaxValueBytes) fail(e, "a value exceeds 32 MiB");
      text_bytes_ += v.s.size();
      if (text_bytes_ > kMaxTextBytes) fail(e, "the template computed more than 1 GiB of text");
    } else if (v.is(K::kList) && v.list->size() > kMaxListItems) {
      fail(e, "a list exceeds a million items");
    }
    return v;
  }

  Value compute(const Expr& e) {
    switch (e.kind) {
      case Expr::Kind::kLiteral: return e.value;
      case Expr::Kind::kName: return lookup(e.name);
      case Expr::Kind::kAttr: {
        const Value obj = eval(*e.a[0]);
        if (!obj.defined()) fail(e, "'" + describe(*e.a[0]) + "' is undefined (reading ." + e.name + ")");
        return obj.get(e.name);
      }
      case Expr::Kind::kIndex: return index(e, eval(*e.a[0]), eval(*e.a[1]));
      case Expr::Kind::kSlice: return slice(e);
      case Expr::Kind::kCall: return call(e);
      case Expr::Kind::kFilter: return filter(e);
      case Expr::Kind::kTest: {
        const bool r = test(e);
        return Value::boolean(e.op == "not" ? !r : r);
      }
      case Expr::Kind::kUnary: {
        const Value v = eval(*e.a[0]);
        if (e.op == "not") return Value::boolean(!v.truthy());
        if (v.is(K::kInt)) {
          if (e.op == "-" && v.i == std::numeric_limits<int64_t>::min()) fail(e, "integer overflow");
          return Value::integer(e.op == "-" ? -v.i : v.i);
        }
        if (v.is(K::kFloat)) return Value::number(e.op == "-" ? -v.f : v.f);
        fail(e, std::string("bad operand for unary ") + e.op + ": " + v.type_name());
      }
      case Expr::Kind::kBinary: return binary(e);
      case Expr::Kind::kCond:
        if (eval(*e.a[0]).truthy()) return eval(*e.a[1]);
        return e.a[2] ? eval(*e.a[2]) : Value();
      case Expr::Kind::kList: {
        List l;
        for (const ExprP& x : e.a) l.push_back(eval(*x));
        return Value::of_list(std::move(l));
      }
      case Expr::Kind::kDict: {
        Dict d;
        for (size_t k = 0; k + 1 < e.a.size(); k += 2) d.emplace_back(eval(*e.a[k]).to_string(), eval(*e.a[k + 1]));
        return Value::of_dict(std::move(d));
      }
    }
    return Value();
  }

  static std::string describe(const Expr& e) {
    if (e.kind == Expr::Kind::kName) return e.name;
    if (e.kind == Expr::Kind::kAttr) return describe(*e.a[0]) + "." + e.name;
    return "value";
  }

  Value index(const Expr& e, const Value& obj, const Value& key) {
    if (obj.is(K::kDict)) return obj.get(key.to_string());
    if (obj.is(K::kList) || obj.is(K::kString)) {
      // Strings index by character, as Python's do, not by byte.
      const std::vector<size_t> at = obj.is(K::kString) ? char_starts(obj.s) : std::vector<size_t>{};
      const int64_t n = obj.is(K::kList) ? static_cast<int64_t>(obj.list->size()) : static_cast<int64_t>(at.size()) - 1;
      const int64_t i = norm_index(as_int(e, key), n);
      if (i < 0 || i >= n) fail(e, "index " + key.to_string() + " out of range (length " + std::to_string(n) + ")");
      if (obj.is(K::kList)) return (*obj.list)[i];
      return Value::string(obj.s.substr(at[i], at[i + 1] - at[i]));
    }
    if (!obj.defined()) fail(e, "'" + describe(*e.a[0]) + "' is undefined (reading [" + key.to_string() + "])");
    fail(e, std::string("cannot index a ") + obj.type_name());
  }

  Value slice(const Expr& e) {
    const Value obj = eval(*e.a[0]);
    const std::vector<size_t> at = obj.is(K::kString) ? char_starts(obj.s) : std::vector<size_t>{};  // by character
    const int64_t n = obj.is(K::kList) ? static_cast<int64_t>(obj.list->size())
                      : obj.is(K::kString) ? static_cast<int64_t>(at.size()) - 1
                                           : (fail(e, std::string("cannot slice a ") + obj.type_name()), 0);
    const int64_t step = e.a[3] ? as_int(e, eval(*e.a[3])) : 1;
    if (step == 0) fail(e, "slice step cannot be zero");
    const auto bound = [&](const ExprP& x, int64_t dflt) {
      if (!x) return dflt;
      const int64_t i = norm_index(as_int(e, eval(*x)), n);
      return step > 0 ? std::clamp<int64_t>(i, 0, n) : std::clamp<int64_t>(i, -1, n - 1);
    };
    const int64_t b = bound(e.a[1], step > 0 ? 0 : n - 1), end = bound(e.a[2], step > 0 ? n : -1);
    if (obj.is(K::kString)) {
      std::string s;
      for (int64_t k = b; step > 0 ? k < end : k > end; k += step)
        s.append(obj.s, at[k], at[k + 1] - at[k]);
      return Value::string(s);
    }
    List l;
    for (int64_t k = b; step > 0 ? k < end : k > end; k += step) l.push_back((*obj.list)[k]);
    return Value::of_list(std::move(l));
  }

  void args_of(const Expr& e, size_t from, Args& args, Kwargs& kwargs) {
    for (size_t k = from; k < e.a.size(); ++k) args.push_back(eval(*e.a[k]));
    for (const auto& [key, x] : e.kwargs) kwargs.emplace_back(key, eval(*x));
  }

  Value call(const Expr& e) {
    Args args;
    Kwargs kwargs;
    args_of(e, 1, args, kwargs);
    const Expr& target = *e.a[0];
    if (target.kind == Expr::Kind::kAttr) {  // a method of a string, dict or list
      const Value obj = eval(*target.a[0]);
      if (obj.is(K::kString) || obj.is(K::kDict) || obj.is(K::kList)) return method(e, obj, target.name, args);
    }
    const Value f = eval(target);
    if (!f.is(K::kFunction)) fail(e, "'" + describe(target) + "' is not callable");
    return (*f.fn)(args, kwargs);
  }

  Value method(const Expr& e, const Value& obj, const std::string& m, const Args& a) {
    const auto arg = [&](size_t k) { return k < a.size() ? a[k].to_string() : std::string(); };
    if (obj.is(K::kString)) {
      const std::string& s = obj.s;
      if (m == "strip") return Value::string(strip(s, arg(0), true, true));
      if (m == "lstrip") return Value::string(strip(s, arg(0), true, false));
      if (m == "rstrip") return Value::string(strip(s, arg(0), false, true));
      if (m == "upper" || m == "lower") {
        std::string r = s;
        for (char& c : r) c = static_cast<char>(m == "upper" ? std::toupper(static_cast<unsigned char>(c))
                                                             : std::tolower(static_cast<unsigned char>(c)));
        return Value::string(r);
      }
      if (m == "startswith") return Value::boolean(s.compare(0, arg(0).size(), arg(0)) == 0);
      if (m == "endswith")
        return Value::boolean(s.size() >= arg(0).size() && s.compare(s.size() - arg(0).size(), arg(0).size(), arg(0)) == 0);
      if (m == "replace") {
        std::string r, from = arg(0), to = arg(1);
        if (from.empty()) return obj;
        for (size_t k = 0; k < s.size();) {
          if (s.compare(k, from.size(), from) == 0) r += to, k += from.size();
          else r += s[k++];
          if (r.size() > kMaxValueBytes) fail(e, "replace: the result exceeds 32 MiB");
        }
        return Value::string(r);
      }
      if (m == "split") {
        List parts;
        const std::string sep = arg(0);
        if (sep.empty()) {  // on runs of whitespace
          size_t k = 0;
          while (k < s.size()) {
            while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
            size_t e2 = k;
            while (e2 < s.size() && !std::isspace(static_cast<unsigned char>(s[e2]))) ++e2;
            if (e2 > k) parts.push_back(Value::string(s.substr(k, e2 - k)));
            k = e2;
          }
        } else {
          size_t k = 0;
          for (size_t at; (at = s.find(sep, k)) != std::string::npos; k = at + sep.size())
            parts.push_back(Value::string(s.substr(k, at - k)));
          parts.push_back(Value::string(s.substr(k)));
        }
        return Value::of_list(std::move(parts));
      }
      if (m == "find") return Value::integer(static_cast<int64_t>(s.find(arg(0))));
    } else if (obj.is(K::kDict)) {
      if (m == "items") return items_of(obj);
      if (m == "keys") return Value::of_list(iterate(e, obj));
      if (m == "values") {
        List l;
        for (const auto& kv : *obj.dict) l.push_back(kv.second);
        return Value::of_list(std::move(l));
      }
      if (m == "get") {
        const Value v = obj.get(arg(0));
        return v.defined() ? v : (a.size() > 1 ? a[1] : Value::none());
      }
    }
    fail(e, std::string("a ") + obj.type_name() + " has no method '" + m + "'");
  }

  Value filter(const Expr& e) {
    const Value v = eval(*e.a[0]);
    Args a;
    Kwargs kw;
    args_of(e, 1, a, kw);
    const std::string& f = e.name;
    if (f == "trim") return Value::string(strip(v.to_string(), a.empty() ? "" : a[0].to_string(), true, true));
    if (f == "length" || f == "count")
      return Value::integer(v.is(K::kString) ? static_cast<int64_t>(char_starts(v.s).size()) - 1
                                             : static_cast<int64_t>(iterate(e, v).size()));
    if (f == "list") return Value::of_list(iterate(e, v));
    if (f == "string") return Value::string(v.to_string());
    if (f == "upper" || f == "lower") return method(e, Value::string(v.to_string()), f, {});
    if (f == "first" || f == "last") {
      const List l = iterate(e, v);
      return l.empty() ? Value() : f == "first" ? l.front() : l.back();
    }
    if (f == "join") {
      std::string out, sep = a.empty() ? "" : a[0].to_string();
      const List l = iterate(e, v);
      for (size_t k = 0; k < l.size(); ++k) out += (k ? sep : "") + l[k].to_string();
      return Value::string(out);
    }
    if (f == "default" || f == "d") return v.defined() && !(a.size() > 1 && a[1].truthy() && !v.truthy()) ? v : (a.empty() ? Value::string("") : a[0]);
    if (f == "replace") return method(e, Value::string(v.to_string()), "replace", a);
    if (f == "items") return v.is(K::kDict) ? items_of(v) : Value::of_list({});
    if (f == "int") return Value::integer(v.is(K::kString) ? std::atoll(v.s.c_str()) : as_int(e, v));
    if (f == "tojson") {
      int64_t indent = -1;
      for (const auto& [k, x] : kw)
        if (k == "indent" && x.is(K::kInt)) indent = x.i;
      if (!a.empty() && a[0].is(K::kInt)) indent = a[0].i;
      if (indent > kMaxJsonIndent) fail(e, "tojson indent above " + std::to_string(kMaxJsonIndent));
      return Value::string(v.to_json(static_cast<int>(indent)));
    }
    if (f == "selectattr" || f == "rejectattr") {
      if (a.empty()) fail(e, f + ": an attribute name is required");
      List out;
      for (const Value& x : iterate(e, v)) {
        const Value attr = x.get(a[0].to_string());
        bool ok = attr.truthy();
        if (a.size() > 1) ok = apply_test(e, a[1].to_string(), attr, Args(a.begin() + 2, a.end()));
        if (ok == (f == "selectattr")) out.push_back(x);
      }
      return Value::of_list(std::move(out));
    }
    if (f == "map") {
      List out;
      std::string attr;
      for (const auto& [k, x] : kw)
        if (k == "attribute") attr = x.to_string();
      for (const Value& x : iterate(e, v)) out.push_back(attr.empty() ? x : x.get(attr));
      return Value::of_list(std::move(out));
    }
    if (f == "reverse") {
      List l = iterate(e, v);
      std::reverse(l.begin(), l.end());
      if (v.is(K::kString)) {
        std::string s;
        for (const Value& c : l) s += c.s;
        return Value::string(s);
      }
      return Value::of_list(std::move(l));
    }
    if (f == "capitalize" || f == "title") {
      std::string s = v.to_string();
      bool start = true;
      for (char& c : s) {
        const unsigned char u = static_cast<unsigned char>(c);
        c = static_cast<char>(start ? std::toupper(u) : (f == "capitalize" ? std::tolower(u) : c));
        start = f == "title" ? std::isspace(u) != 0 : false;
      }
      return Value::string(s);
    }
    if (f == "abs") {
      if (v.is(K::kFloat)) return Value::number(std::fabs(v.f));
      const int64_t i = as_int(e, v);
      if (i == std::numeric_limits<int64_t>::min()) fail(e, "integer overflow");
      return Value::integer(i < 0 ? -i : i);
    }
    fail(e, "unknown filter '" + f + "'");
  }

  bool test(const Expr& e) {
    const Value v = eval(*e.a[0]);
    Args a;
    Kwargs kw;
    args_of(e, 1, a, kw);
    return apply_test(e, e.name, v, a);
  }

  bool apply_test(const Expr& e, const std::string& t, const Value& v, const Args& a) {
    if (t == "defined") return v.defined();
    if (t == "undefined") return !v.defined();
    if (t == "none") return v.is(K::kNone);
    if (t == "string") return v.is(K::kString);
    if (t == "mapping") return v.is(K::kDict);
    if (t == "iterable") return v.is(K::kList) || v.is(K::kDict) || v.is(K::kString);
    if (t == "sequence") return v.is(K::kList) || v.is(K::kString) || v.is(K::kDict);
    if (t == "number") return v.is(K::kInt) || v.is(K::kFloat);
    if (t == "integer") return v.is(K::kInt);
    if (t == "float") return v.is(K::kFloat);
    if (t == "boolean") return v.is(K::kBool);
    if (t == "true") return v.is(K::kBool) && v.b;
    if (t == "false") return v.is(K::kBool) && !v.b;
    if (t == "callable") return v.is(K::kFunction);
    if (t == "equalto" || t == "eq" || t == "==" || t == "sameas") return !a.empty() && v == a[0];
    if (t == "ne") return !a.empty() && !(v == a[0]);
    if (t == "odd" || t == "even") return (as_int(e, v) % 2 != 0) == (t == "odd");
    if (t == "divisibleby") return !a.empty() && as_int(e, a[0]) != 0 && as_int(e, v) % as_int(e, a[0]) == 0;
    if (t == "in") return !a.empty() && contains(e, a[0], v);
    if (t == "lower" || t == "upper") {
      const std::string s = v.to_string();
      return std::all_of(s.begin(), s.end(), [&](char c) {
        return t == "lower" ? !std::isupper(static_cast<unsigned char>(c)) : !std::islower(static_cast<unsigned char>(c));
      });
    }
    fail(e, "unknown test '" + t + "'");
  }

  bool contains(const Expr& e, const Value& container, const Value& item) {
    if (container.is(K::kString)) return container.s.find(item.to_string()) != std::string::npos;
    if (container.is(K::kDict)) return container.get(item.to_string()).defined();
    if (container.is(K::kList))
      return std::any_of(container.list->begin(), container.list->end(), [&](const Value& x) { return x == item; });
    if (!container.defined()) fail(e, "'in' on an undefined value");
    fail(e, std::string("'in' on a ") + container.type_name());
  }

  Value binary(const Expr& e) {
    const std::string& op = e.op;
    if (op == "and") {
      const Value l = eval(*e.a[0]);
      return l.truthy() ? eval(*e.a[1]) : l;
    }
    if (op == "or") {
      const Value l = eval(*e.a[0]);
      return l.truthy() ? l : eval(*e.a[1]);
    }
    const Value l = eval(*e.a[0]), r = eval(*e.a[1]);
    if (op == "==") return Value::boolean(l == r);
    if (op == "!=") return Value::boolean(!(l == r));
    if (op == "in") return Value::boolean(contains(e, r, l));
    if (op == "notin") return Value::boolean(!contains(e, r, l));
    if (op == "~") return Value::string(l.to_string() + r.to_string());
    const bool ln = l.is(K::kInt) || l.is(K::kFloat) || l.is(K::kBool), rn = r.is(K::kInt) || r.is(K::kFloat) || r.is(K::kBool);
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c = 0;
      if (ln && rn) {
        const double x = l.is(K::kFloat) ? l.f : double(as_int(e, l)), y = r.is(K::kFloat) ? r.f : double(as_int(e, r));
        c = x < y ? -1 : x > y ? 1 : 0;
      } else if (l.is(K::kString) && r.is(K::kString)) {
        c = l.s.compare(r.s) < 0 ? -1 : l.s.compare(r.s) > 0 ? 1 : 0;
      } else {
        fail(e, std::string("cannot compare a ") + l.type_name() + " and a " + r.type_name());
      }
      return Value::boolean(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    if (op == "+") {
      if (l.is(K::kString) && r.is(K::kString)) return Value::string(l.s + r.s);
      if (l.is(K::kList) && r.is(K::kList)) {
        List out = *l.list;
        out.insert(out.end(), r.list->begin(), r.list->end());
        return Value::of_list(std::move(out));
      }
    }
    if (!ln || !rn)
      fail(e, std::string("unsupported operand types for ") + op + ": " + l.type_name() + " and " + r.type_name());
    const bool ints = !l.is(K::kFloat) && !r.is(K::kFloat);
    const double x = l.is(K::kFloat) ? l.f : double(as_int(e, l)), y = r.is(K::kFloat) ? r.f : double(as_int(e, r));
    if (ints && (op == "+" || op == "-" || op == "*")) {
      int64_t out = 0;
      const int64_t a = as_int(e, l), b = as_int(e, r);
      const bool over = op == "+" ? __builtin_add_overflow(a, b, &out)
                        : op == "-" ? __builtin_sub_overflow(a, b, &out)
                                    : __builtin_mul_overflow(a, b, &out);
      if (over) fail(e, "integer overflow");
      return Value::integer(out);
    }
    if (op == "+") return Value::number(x + y);
    if (op == "-") return Value::number(x - y);
    if (op == "*") return Value::number(x * y);
    if (op == "/") {
      if (y == 0) fail(e, "division by zero");
      return Value::number(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail(e, "division by zero");
      if (ints) {
        const int64_t a = as_int(e, l), b = as_int(e, r);
        if (a == std::numeric_limits<int64_t>::min() && b == -1) fail(e, "integer overflow");
        int64_t q = a / b, m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) --q, m += b;  // Python floors
        return Value::integer(op == "//" ? q : m);
      }
      return Value::number(op == "//" ? std::floor(x / y) : x - std::floor(x / y) * y);
    }
    if (op == "**") {
      const double p = std::pow(x, y);
      if (ints && as_int(e, r) >= 0) {
        if (!(std::fabs(p) < 9.2e18)) fail(e, "integer overflow");
        return Value::integer(static_cast<int64_t>(p));
      }
      return Value::number(p);
    }
    fail(e, "unknown operator " + op);
  }

  std::vector<std::map<std::string, Value>> scopes_;
  std::time_t now_;
  int64_t iterations_ = 0;
  int macro_depth_ = 0;
  int64_t text_bytes_ = 0;  // the text of every value computed so far
};

}  // namespace

Template::Template(const std::string& source) : nodes_(parse_template(source)) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const Value& context, std::time_t now) const {
  Renderer r(context, now);
  std::string out;
  LoopSignal sig;
  r.render(nodes_, out, sig);
  return out;
}

}  // namespace kvserve::jinja
