#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "grammar/regex.h"

namespace kvserve::grammar {
namespace {

using json = nlohmann::ordered_json;

constexpr int64_t kMaxIntBound = 1'000'000'000'000'000;  // 1e18: |bounds| past it are refused
constexpr int kMaxFreeDigits = 16;                        // digits of an unbounded integer part

const std::set<std::string>& annotations() {
  static const std::set<std::string> s = {"title", "description", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
                                          "definitions"};
  return s;
}

// Regular expressions of the formats, matched inside a JSON string; bounded where the format
// allows any length, so that generation ends.
const std::map<std::string, std::string>& formats() {
  static const std::string date =
      "[1-9][0-9]{3}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))";
  static const std::string time = "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
  static const std::map<std::string, std::string> f = {
      {"date", date},
      {"time", time},
      {"date-time", date + "T" + time},
      {"uuid", "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"},
      {"email", "[a-zA-Z0-9_+-]{1,32}(\\.[a-zA-Z0-9_+-]{1,32}){0,3}@[a-zA-Z0-9]([a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?"
                "(\\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,30}[a-zA-Z0-9])?){0,3}\\.[a-zA-Z]{2,8}"},
  };
  return f;
}

std::string compact(const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::strict); }

// Integers of one length n in [lo, hi] (digit strings of length n).
Node same_length(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return empty();
  if (lo == hi) return lit(lo);
  if (lo[0] == hi[0]) return seq({lit(lo.substr(0, 1)), same_length(lo.substr(1), hi.substr(1))});
  const size_t rest = lo.size() - 1;
  const std::string nines(rest, '9'), zeros(rest, '0');
  std::vector<Node> alts;
  char from = lo[0], to = hi[0];
  if (lo.substr(1) != zeros) {
    alts.push_back(seq({lit(lo.substr(0, 1)), same_length(lo.substr(1), nines)}));
    ++from;
  }
  const bool hi_full = hi.substr(1) == nines;
  if (!hi_full) --to;
  if (from <= to) {
    alts.push_back(seq({chars({{static_cast<uint32_t>(from), static_cast<uint32_t>(to)}}),
                        rest ? repeat(chars({{'0', '9'}}), static_cast<int32_t>(rest), static_cast<int32_t>(rest)) : empty()}));
  }
  if (!hi_full) alts.push_back(seq({lit(hi.substr(0, 1)), same_length(zeros, hi.substr(1))}));
  return alt(std::move(alts));
}

// Non-negative integers in [a, b] (b < 0: unbounded).
Node non_negative(int64_t a, int64_t b) {
  std::vector<Node> alts;
  const int da = static_cast<int>(std::to_string(a).size());
  const int db = b < 0 ? std::max(da, kMaxFreeDigits) : static_cast<int>(std::to_string(b).size());
  for (int len = da; len <= db; ++len) {
    if (b < 0 && len > da) {  // every longer number, up to the digit cap
      alts.push_back(seq({chars({{'1', '9'}}), repeat(chars({{'0', '9'}}), len - 1, db - 1)}));
      break;
    }
    int64_t first = 1;
    for (int i = 1; i < len; ++i) first *= 10;
    if (len == 1) first = 0;
    const int64_t last = first == 0 ? 9 : first * 10 - 1;
    const int64_t lo = std::max(a, first), hi = b < 0 ? last : std::min(b, last);
    if (lo > hi) continue;
    alts.push_back(same_length(std::to_string(lo), std::to_string(hi)));
  }
  return alt(std::move(alts));
}

class SchemaConverter {
 public:
  SchemaConverter(const json& root, const JsonSchemaLimits& limits) : root_(root), limits_(limits) {}

  RuleSet run() {
    Node body = visit(root_, "#", 0);
    out_.add("root", std::move(body));
    add_common();
    return std::move(out_);
  }

  void add_common() {
    out_.add("json-string", seq({lit("\""), star(ref("json-char")), lit("\"")}));
    out_.add("json-char", alt({chars({{'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}, {0, 0x1F}}, true),
                               seq({lit("\\"), alt({chars({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'},
                                                           {'n', 'n'}, {'r', 'r'}, {'t', 't'}}),
                                                    seq({lit("u"), repeat(chars({{'0', '9'}, {'a', 'f'}, {'A', 'F'}}), 4, 4)})})})}));
    out_.add("json-integer", seq({opt(lit("-")), non_negative(0, -1)}));
    out_.add("json-number", seq({ref("json-integer"), opt(seq({lit("."), repeat(chars({{'0', '9'}}), 1, kMaxFreeDigits)})),
                                 opt(seq({chars({{'e', 'e'}, {'E', 'E'}}), opt(chars({{'+', '+'}, {'-', '-'}})),
                                          repeat(chars({{'0', '9'}}), 1, 2)}))}));
    out_.add("json-boolean", alt({lit("true"), lit("false")}));
    out_.add("json-null", lit("null"));
    out_.add("json-value", alt({ref("json-object"), ref("json-array"), ref("json-string"), ref("json-number"),
                                ref("json-boolean"), ref("json-null")}));
    out_.add("json-member", seq({ref("json-string"), lit(":"), ref("json-value")}));
    out_.add("json-object", seq({lit("{"), opt(seq({ref("json-member"), star(seq({lit(","), ref("json-member")}))})), lit("}")}));
    out_.add("json-array", seq({lit("["), opt(seq({ref("json-value"), star(seq({lit(","), ref("json-value")}))})), lit("]")}));
  }

 private:
  [[noreturn]] static void fail(const std::string& what, const std::string& at) {
    throw GrammarError("json_schema: " + what + " at " + at);
  }

  Node visit(const json& s, const std::string& at, int depth) {
    if (depth > limits_.max_depth) fail("schemas nested deeper than " + std::to_string(limits_.max_depth), at);
    if (s.is_boolean()) {
      if (!s.get<bool>()) fail("the schema false allows no value", at);
      return ref("json-value");
    }
    if (!s.is_object()) fail("a schema must be an object or a boolean", at);
    for (const auto& [k, v] : s.items()) {
      static const std::set<std::string> known = {
          "type", "properties", "required", "additionalProperties", "enum", "const", "anyOf", "oneOf", "allOf",
          "items", "prefixItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "$ref",
          "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
      if (!known.count(k) && !annotations().count(k)) fail("keyword '" + k + "' is not supported", at);
    }
    if (auto r = s.find("$ref"); r != s.end()) {
      for (const auto& [k, v] : s.items())
        if (k != "$ref" && !annotations().count(k)) fail("keyword '" + k + "' beside $ref is not supported", at);
      if (!r->is_string()) fail("$ref must be a string", at + "/$ref");
      return ref(resolve(r->get<std::string>(), at + "/$ref", depth));
    }
    if (auto e = s.find("enum"); e != s.end()) {
      if (!e->is_array() || e->empty()) fail("enum must be a non-empty array", at + "/enum");
      std::vector<std::string> words;
      for (const json& v : *e) words.push_back(compact(v));
      return literal_trie(std::move(words));
    }
    if (auto c = s.find("const"); c != s.end()) return lit(compact(*c));
    for (const char* k : {"anyOf", "oneOf"}) {
      if (auto a = s.find(k); a != s.end()) {
        if (!a->is_array() || a->empty()) fail(std::string(k) + " must be a non-empty array", at + "/" + k);
        for (const char* other : {"type", "properties", "items", "prefixItems"})
          if (s.contains(other)) fail(std::string(other) + " beside " + k + " is not supported", at);
        std::vector<Node> alts;
        for (size_t i = 0; i < a->size(); ++i)
          alts.push_back(visit((*a)[i], at + "/" + k + "/" + std::to_string(i), depth + 1));
        return alt(std::move(alts));
      }
    }
    if (auto a = s.find("allOf"); a != s.end()) {
      if (!a->is_array() || a->size() != 1) fail("allOf of other than one schema is not supported", at + "/allOf");
      if (s.size() > 1 + count_annotations(s)) fail("keywords beside allOf are not supported", at);
      return visit((*a)[0], at + "/allOf/0", depth + 1);
    }
    std::vector<std::string> types;
    if (auto t = s.find("type"); t != s.end()) {
      if (t->is_string()) {
        types.push_back(t->get<std::string>());
      } else if (t->is_array() && !t->empty()) {
        for (const json& x : *t) {
          if (!x.is_string()) fail("type must be a string or an array of strings", at + "/type");
          types.push_back(x.get<std::string>());
        }
      } else {
        fail("type must be a string or a non-empty array of strings", at + "/type");
      }
    } else if (s.contains("properties") || s.contains("additionalProperties") || s.contains("required")) {
      types.push_back("object");
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
      types.push_back("array");
    } else if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength")) {
      types.push_back("string");
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") || s.contains("exclusiveMaximum")) {
      types.push_back("integer");
    } else {
      return ref("json-value");
    }
    std::vector<Node> alts;
    for (const std::string& t : types) alts.push_back(typed(s, t, at, depth));
    return alt(std::move(alts));
  }

  static size_t count_annotations(const json& s) {
    size_t n = 0;
    for (const auto& [k, v] : s.items()) n += annotations().count(k);
    return n;
  }

  Node typed(const json& s, const std::string& t, const std::string& at, int depth) {
    if (t == "object") return object(s, at, depth);
    if (t == "array") return array(s, at, depth);
    if (t == "string") return string(s, at);
    if (t == "integer") return integer(s, at);
    if (t == "number") {
      for (const char* k : {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})
        if (s.contains(k)) fail(std::string(k) + " of a number is not supported (only of an integer)", at);
      return ref("json-number");
    }
    if (t == "boolean") return ref("json-boolean");
    if (t == "null") return ref("json-null");
    fail("unknown type '" + t + "'", at + "/type");
  }

  static int64_t count_of(const json& s, const char* k, int64_t dflt, const std::string& at) {
    auto it = s.find(k);
    if (it == s.end()) return dflt;
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 100'000)
      fail(std::string(k) + " must be an integer from 0 to 100000", at + "/" + k);
    return it->get<int64_t>();
  }

  Node object(const json& s, const std::string& at, int depth) {
    std::vector<std::pair<std::string, Node>> props;
    std::vector<bool> required;
    std::set<std::string> req;
    if (auto r = s.find("required"); r != s.end()) {
      if (!r->is_array()) fail("required must be an array of strings", at + "/required");
      for (const json& x : *r) {
        if (!x.is_string()) fail("required must be an array of strings", at + "/required");
        req.insert(x.get<std::string>());
      }
    }
    std::set<std::string> named;
    if (auto p = s.find("properties"); p != s.end()) {
      if (!p->is_object()) fail("properties must be an object", at + "/properties");
      for (const auto& [name, sub] : p->items()) {
        named.insert(name);
        props.emplace_back(name, visit(sub, at + "/properties/" + pointer_escape(name), depth + 1));
        required.push_back(req.count(name) > 0);
      }
    }
    for (const std::string& r : req)
      if (!named.count(r)) {  // required but not described: any value
        props.emplace_back(r, ref("json-value"));
        required.push_back(true);
        named.insert(r);
      }
    // Additional properties: absent or false allows none; true or a schema allows any other name.
    std::optional<Node> extra;
    if (auto a = s.find("additionalProperties"); a != s.end()) {
      if (!(a->is_boolean() && !a->get<bool>())) {
        std::vector<std::string> names(named.begin(), named.end());
        Node key = seq({lit("\""), other_key(names), lit("\"")});
        Node value = a->is_boolean() ? ref("json-value") : visit(*a, at + "/additionalProperties", depth + 1);
        const std::string rule = unique("extra-member");
        reserve(rule);
        out_.add(rule, seq({std::move(key), lit(":"), std::move(value)}));
        extra = ref(rule);
      }
    }
    // The members in order, each optional one present or not: rule k decides property k given
    // whether a member came before it (so a comma is needed), then passes on.
    const std::string base = unique("object");
    reserve(base);
    std::vector<std::string> names;
    for (size_t k = 0; k <= props.size(); ++k)
      for (int comma = 0; comma < 2; ++comma) names.push_back(base + "-" + std::to_string(k) + (comma ? "c" : ""));
    auto name_of = [&](size_t k, bool comma) { return names[2 * k + (comma ? 1 : 0)]; };
    for (size_t k = props.size() + 1; k-- > 0;) {
      for (int comma = 0; comma < 2; ++comma) {
        Node body;
        if (k == props.size()) {
          if (extra) {
            Node more = star(seq({lit(","), *extra}));
            body = comma ? std::move(more) : opt(seq({*extra, std::move(more)}));
          } else {
            body = empty();
          }
        } else {
          Node member = seq({lit(comma ? "," : ""), lit(compact(json(props[k].first))), lit(":"), props[k].second,
                             ref(name_of(k + 1, true))});
          body = required[k] ? std::move(member) : alt({std::move(member), ref(name_of(k + 1, comma != 0))});
        }
        reserve(name_of(k, comma != 0));
        out_.add(name_of(k, comma != 0), std::move(body));
      }
    }
    return seq({lit("{"), ref(name_of(0, false)), lit("}")});
  }

  // JSON string contents that are none of `names`. Names that are not plain printable ASCII
  // (rare as keys) make it any string: a duplicate key is then possible, never a wrong value.
  Node other_key(std::vector<std::string> names) {
    const bool plain = std::all_of(names.begin(), names.end(), [](const std::string& n) {
      return std::all_of(n.begin(), n.end(), [](char c) { return c >= 0x20 && c < 0x7F && c != '"' && c != '\\'; });
    });
    if (names.empty() || !plain) return star(ref("json-char"));
    std::sort(names.begin(), names.end());
    return other_than(names, 0, names.size(), 0);
  }
  // Strings that continue the prefix names[b][0, d) and are none of names[b, e).
  Node other_than(const std::vector<std::string>& w, size_t b, size_t e, size_t d) {
    std::vector<Node> alts;
    size_t i = b;
    if (w[b].size() == d) {
      ++i;  // the prefix is a name: it must go on
    } else {
      alts.push_back(empty());
    }
    std::vector<CharRange> used = {{'"', '"'}, {'\\', '\\'}, {0x7F, 0x7F}, {0, 0x1F}};
    while (i < e) {
      const auto c = static_cast<uint32_t>(static_cast<unsigned char>(w[i][d]));
      size_t j = i;
      while (j < e && static_cast<unsigned char>(w[j][d]) == c) ++j;
      used.push_back({c, c});
      alts.push_back(seq({lit(std::string(1, static_cast<char>(c))), other_than(w, i, j, d + 1)}));
      i = j;
    }
    Node escape = seq({lit("\\"), alt({chars({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'}, {'n', 'n'},
                                              {'r', 'r'}, {'t', 't'}}),
                                       seq({lit("u"), repeat(chars({{'0', '9'}, {'a', 'f'}, {'A', 'F'}}), 4, 4)})})});
    alts.push_back(seq({alt({chars(used, true), std::move(escape)}), star(ref("json-char"))}));
    return alt(std::move(alts));
  }

  Node array(const json& s, const std::string& at, int depth) {
    const int64_t min = count_of(s, "minItems", 0, at), max = count_of(s, "maxItems", -1, at);
    if (max >= 0 && max < min) fail("maxItems below minItems", at);
    std::vector<Node> prefix;
    if (auto p = s.find("prefixItems"); p != s.end()) {
      if (!p->is_array()) fail("prefixItems must be an array of schemas", at + "/prefixItems");
      for (size_t i = 0; i < p->size(); ++i)
        prefix.push_back(visit((*p)[i], at + "/prefixItems/" + std::to_string(i), depth + 1));
    }
    std::optional<Node> item;
    if (auto it = s.find("items"); it != s.end()) {
      if (!(it->is_boolean() && !it->get<bool>())) item = visit(*it, at + "/items", depth + 1);
    } else if (prefix.empty()) {
      item = ref("json-value");
    }
    const int64_t n_prefix = static_cast<int64_t>(prefix.size());
    if (n_prefix > 0) {
      // Prefix items in order (as many as maxItems allows), then more of `items`.
      const int64_t taken = max >= 0 ? std::min(max, n_prefix) : n_prefix;
      if (!item && min > taken) fail("minItems needs more items than prefixItems gives", at);
      std::vector<Node> parts = {lit("[")};
      for (int64_t i = 0; i < taken; ++i) {
        if (i) parts.push_back(lit(","));
        parts.push_back(std::move(prefix[i]));
      }
      if (item && (max < 0 || max > taken)) {
        const int64_t more_min = std::max<int64_t>(0, min - taken), more_max = max < 0 ? -1 : max - taken;
        parts.push_back(repeat(seq({lit(","), *item}), static_cast<int32_t>(more_min), static_cast<int32_t>(more_max)));
      }
      parts.push_back(lit("]"));
      return seq(std::move(parts));
    }
    if (!item) {
      if (min > 0) fail("minItems with items false", at);
      return lit("[]");
    }
    if (max == 0) return lit("[]");
    Node list = seq({*item, repeat(seq({lit(","), *item}), static_cast<int32_t>(std::max<int64_t>(0, min - 1)),
                                   max < 0 ? -1 : static_cast<int32_t>(max - 1))});
    return seq({lit("["), min > 0 ? std::move(list) : opt(std::move(list)), lit("]")});
  }

  Node string(const json& s, const std::string& at) {
    const int64_t min = count_of(s, "minLength", 0, at), max = count_of(s, "maxLength", -1, at);
    if (max >= 0 && max < min) fail("maxLength below minLength", at);
    const bool lengths = s.contains("minLength") || s.contains("maxLength");
    if (auto f = s.find("format"); f != s.end()) {
      if (!f->is_string()) fail("format must be a string", at + "/format");
      auto it = formats().find(f->get<std::string>());
      if (it == formats().end()) fail("format '" + f->get<std::string>() + "' is not supported", at + "/format");
      if (lengths || s.contains("pattern")) fail("format with pattern, minLength or maxLength is not supported", at);
      return seq({lit("\""), parse_regex(it->second, {.json_string = true}), lit("\"")});
    }
    if (auto p = s.find("pattern"); p != s.end()) {
      if (!p->is_string()) fail("pattern must be a string", at + "/pattern");
      if (lengths) fail("pattern with minLength or maxLength is not supported", at);
      try {
        return seq({lit("\""), parse_regex(p->get<std::string>(), {.json_string = true}), lit("\"")});
      } catch (const GrammarError& e) {
        fail(e.what(), at + "/pattern");
      }
    }
    if (!lengths) return ref("json-string");
    return seq({lit("\""), repeat(ref("json-char"), static_cast<int32_t>(min), static_cast<int32_t>(max)), lit("\"")});
  }

  static std::optional<int64_t> bound(const json& s, const char* k, bool lower, const std::string& at) {
    auto it = s.find(k);
    if (it == s.end()) return std::nullopt;
    if (!it->is_number()) fail(std::string(k) + " must be a number", at + "/" + k);
    const double v = it->get<double>();
    if (!(std::fabs(v) <= static_cast<double>(kMaxIntBound))) fail(std::string(k) + " is out of range", at + "/" + k);
    return static_cast<int64_t>(lower ? std::ceil(v) : std::floor(v));
  }

  Node integer(const json& s, const std::string& at) {
    std::optional<int64_t> lo = bound(s, "minimum", true, at), hi = bound(s, "maximum", false, at);
    if (auto x = bound(s, "exclusiveMinimum", false, at)) lo = std::max(lo.value_or(*x + 1), *x + 1);
    if (auto x = bound(s, "exclusiveMaximum", true, at)) hi = std::min(hi.value_or(*x - 1), *x - 1);
    if (lo && hi && *lo > *hi) fail("no integer lies between the bounds", at);
    if (!lo && !hi) return ref("json-integer");
    return integer_range(lo, hi);
  }

  std::string resolve(const std::string& target, const std::string& at, int depth) {
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    if (target.empty() || target[0] != '#') fail("only local references (#...) are supported", at);
    const json* node = &root_;
    size_t p = 1;
    while (p < target.size()) {
      if (target[p] != '/') fail("a reference must be a JSON pointer", at);
      const size_t q = target.find('/', p + 1);
      std::string part = target.substr(p + 1, q == std::string::npos ? std::string::npos : q - p - 1);
      for (size_t i; (i = part.find("~1")) != std::string::npos;) part.replace(i, 2, "/");
      for (size_t i; (i = part.find("~0")) != std::string::npos;) part.replace(i, 2, "~");
      if (node->is_object() && node->contains(part)) {
        node = &(*node)[part];
      } else if (node->is_array() && !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                 std::stoul(part) < node->size()) {
        node = &(*node)[std::stoul(part)];
      } else {
        fail("reference '" + target + "' does not resolve", at);
      }
      p = q == std::string::npos ? target.size() : q;
    }
    std::string name = "ref";
    for (char c : target.substr(1))
      name += std::isalnum(static_cast<unsigned char>(c)) ? c : '-';
    name = unique(name);
    refs_[target] = name;
    Node body = visit(*node, target, depth + 1);
    out_.add(name, std::move(body));
    return name;
  }

  void reserve(const std::string& name) { reserved_.insert(name); }
  // A rule name not used yet, nor about to be (rules are added after their parts).
  std::string unique(const std::string& base) {
    std::string n = base + "-" + std::to_string(next_name_++);
    reserve(n);
    return n;
  }
  static std::string pointer_escape(const std::string& s) {
    std::string o;
    for (char c : s) o += c == '~' ? std::string("~0") : c == '/' ? std::string("~1") : std::string(1, c);
    return o;
  }

  const json& root_;
  const JsonSchemaLimits& limits_;
  RuleSet out_;
  std::map<std::string, std::string> refs_;
  std::set<std::string> reserved_;
  int64_t next_name_ = 0;
};

}  // namespace

Node literal_trie(std::vector<std::string> words) {
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  struct Build {
    const std::vector<std::string>& w;
    Node at(size_t b, size_t e, size_t d) const {  // words[b, e) share their first d bytes
      std::vector<Node> alts;
      size_t i = b;
      if (w[i].size() == d) {
        alts.push_back(empty());
        ++i;
      }
      while (i < e) {
        const char c = w[i][d];
        size_t j = i;
        while (j < e && w[j][d] == c) ++j;
        size_t common = d + 1;  // a run with one continuation is one literal
        while (j - i >= 1 && w[i].size() > common && w[j - 1].size() > common && w[i][common] == w[j - 1][common]) {
          const char x = w[i][common];
          bool all = true;
          for (size_t k = i; k < j && all; ++k) all = w[k].size() > common && w[k][common] == x;
          if (!all) break;
          ++common;
        }
        alts.push_back(seq({lit(w[i].substr(d, common - d)), at(i, j, common)}));
        i = j;
      }
      return alts.size() == 1 ? std::move(alts[0]) : alt(std::move(alts));
    }
  };
  if (words.empty()) throw GrammarError("an empty list of choices");
  return Build{words}.at(0, words.size(), 0);
}

Node integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<Node> alts;
  // Negative part: -x for x in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const int64_t a = hi && *hi < 0 ? -*hi : 1;
    const int64_t b = lo ? -*lo : -1;
    alts.push_back(seq({lit("-"), non_negative(a, b)}));
  }
  if (!hi || *hi >= 0) alts.push_back(non_negative(lo && *lo > 0 ? *lo : 0, hi ? *hi : -1));
  return alt(std::move(alts));
}

RuleSet json_schema_rules(const nlohmann::ordered_json& schema, const JsonSchemaLimits& limits) {
  return SchemaConverter(schema, limits).run();
}

RuleSet json_object_rules() {
  return json_schema_rules(nlohmann::ordered_json::object({{"type", "object"}, {"additionalProperties", true}}));
}

}  // namespace kvserve::grammar
