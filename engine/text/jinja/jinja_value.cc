#include "text/jinja/jinja_value.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace kvserve::jinja {
namespace {

// Python's repr of a float: the shortest digits that read back, with ".0" when integral.
std::string float_text(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), f);
  std::string s(buf, end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void dump(const Value& v, int indent, int depth, std::string& out) {
  const auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.kind) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone: out += "null"; return;
    case Value::Kind::kBool: out += v.b ? "true" : "false"; return;
    case Value::Kind::kInt: out += std::to_string(v.i); return;
    case Value::Kind::kFloat: out += float_text(v.f); return;
    case Value::Kind::kString: json_string(v.s, out); return;
    case Value::Kind::kFunction: throw JinjaError("tojson: a function is not JSON");
    case Value::Kind::kList: {
      if (v.list->empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t k = 0; k < v.list->size(); ++k) {
        if (k) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        dump((*v.list)[k], indent, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      out += ']';
      return;
    }
    case Value::Kind::kDict: {
      if (v.dict->empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t k = 0; k < v.dict->size(); ++k) {
        if (k) out += indent >= 0 ? "," : ", ";
        if (indent >= 0) newline(depth + 1);
        json_string((*v.dict)[k].first, out);
        out += ": ";
        dump((*v.dict)[k].second, indent, depth + 1, out);
      }
      if (indent >= 0) newline(depth);
      out += '}';
      return;
    }
  }
}

}  // namespace

namespace {

template <class Json>
Value value_of(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value::boolean(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned: return Value::integer(j.template get<int64_t>());
    case nlohmann::json::value_t::number_float: return Value::number(j.template get<double>());
    case nlohmann::json::value_t::string: return Value::string(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      List l;
      for (const auto& x : j) l.push_back(value_of(x));
      return Value::of_list(std::move(l));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.emplace_back(it.key(), value_of(it.value()));
      return Value::of_dict(std::move(d));
    }
    default: return Value();
  }
}

}  // namespace

Value Value::from_json(const nlohmann::json& j) { return value_of(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return value_of(j); }

bool Value::truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b;
    case Kind::kInt: return i != 0;
    case Kind::kFloat: return f != 0;
    case Kind::kString: return !s.empty();
    case Kind::kList: return !list->empty();
    case Kind::kDict: return !dict->empty();
    case Kind::kFunction: return true;
  }
  return false;
}

Value Value::get(const std::string& key) const {
  if (kind == Kind::kDict)
    for (const auto& [k, v] : *dict)
      if (k == key) return v;
  return Value();
}

void Value::set(const std::string& key, Value v) {
  if (kind != Kind::kDict) throw JinjaError("cannot assign attribute '" + key + "' of a " + type_name());
  for (auto& [k, x] : *dict)
    if (k == key) {
      x = std::move(v);
      return;
    }
  dict->emplace_back(key, std::move(v));
}

std::string Value::to_string() const {
  switch (kind) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b ? "True" : "False";
    case Kind::kInt: return std::to_string(i);
    case Kind::kFloat: return float_text(f);
    case Kind::kString: return s;
    case Kind::kFunction: return "<function>";
    case Kind::kList: {  // Python's repr of a list of strings and numbers
      std::string out = "[";
      for (size_t k = 0; k < list->size(); ++k) {
        const Value& x = (*list)[k];
        out += k ? ", " : "";
        out += x.is(Kind::kString) ? "'" + x.s + "'" : x.to_string();
      }
      return out + "]";
    }
    case Kind::kDict: {
      std::string out = "{";
      for (size_t k = 0; k < dict->size(); ++k) {
        const auto& [key, x] = (*dict)[k];
        out += (k ? ", '" : "'") + key + "': " + (x.is(Kind::kString) ? "'" + x.s + "'" : x.to_string());
      }
      return out + "}";
    }
  }
  return "";
}

std::string Value::to_json(int indent) const {
  std::string out;
  dump(*this, indent, 0, out);
  return out;
}

const char* Value::type_name() const {
  static const char* names[] = {"undefined", "none", "boolean", "integer", "float", "string", "list", "dict",
                                "function"};
  return names[static_cast<int>(kind)];
}

bool operator==(const Value& a, const Value& b) {
  using K = Value::Kind;
  const bool an = a.is(K::kInt) || a.is(K::kFloat) || a.is(K::kBool), bn = b.is(K::kInt) || b.is(K::kFloat) || b.is(K::kBool);
  if (an && bn) {
    const double x = a.is(K::kInt) ? double(a.i) : a.is(K::kBool) ? double(a.b) : a.f;
    const double y = b.is(K::kInt) ? double(b.i) : b.is(K::kBool) ? double(b.b) : b.f;
    return x == y;
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case K::kUndefined:
    case K::kNone: return true;
    case K::kString: return a.s == b.s;
    case K::kList:
      if (a.list->size() != b.list->size()) return false;
      for (size_t k = 0; k < a.list->size(); ++k)
        if (!((*a.list)[k] == (*b.list)[k])) return false;
      return true;
    case K::kDict:
      if (a.dict->size() != b.dict->size()) return false;
      for (const auto& [key, v] : *a.dict)
        if (!(b.get(key) == v) || !b.get(key).defined()) return false;
      return true;
    case K::kFunction: return a.fn == b.fn;
    default: return false;
  }
}

}  // namespace kvserve::jinja
