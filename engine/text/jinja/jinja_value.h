// The values a chat template computes with, as Jinja has them: undefined (distinct from none,
// falsy, and an error only where it is used as a value of some kind), none, booleans, integers,
// floats, strings, lists, dicts (insertion-ordered, shared so that a namespace's attributes can
// be assigned) and callables. JSON converts both ways.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kvserve::jinja {

// A template that cannot be parsed, or raised while rendering (raise_exception, a type error).
class JinjaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;
using Args = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;
using Function = std::function<Value(const Args&, const Kwargs&)>;

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kFunction };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;
  std::shared_ptr<Function> fn;

  static Value none() { return make(Kind::kNone); }
  static Value boolean(bool v) { Value x = make(Kind::kBool); x.b = v; return x; }
  static Value integer(int64_t v) { Value x = make(Kind::kInt); x.i = v; return x; }
  static Value number(double v) { Value x = make(Kind::kFloat); x.f = v; return x; }
  static Value string(std::string v) { Value x = make(Kind::kString); x.s = std::move(v); return x; }
  static Value of_list(List v) { Value x = make(Kind::kList); x.list = std::make_shared<List>(std::move(v)); return x; }
  static Value of_dict(Dict v) { Value x = make(Kind::kDict); x.dict = std::make_shared<Dict>(std::move(v)); return x; }
  static Value function(Function f) { Value x = make(Kind::kFunction); x.fn = std::make_shared<Function>(std::move(f)); return x; }
  static Value from_json(const nlohmann::json& j);
  // Objects keep their keys in the order written, as Python's dicts do (what `tojson` of a
  // client's tool definitions then prints).
  static Value from_json(const nlohmann::ordered_json& j);

  bool is(Kind k) const { return kind == k; }
  bool defined() const { return kind != Kind::kUndefined; }
  bool truthy() const;
  // The dict entry, or undefined (a missing attribute is undefined, not an error).
  Value get(const std::string& key) const;
  void set(const std::string& key, Value v);  // dicts only
  // Jinja's {{ }} text: none prints "None", booleans "True"/"False", undefined "".
  std::string to_string() const;
  // Python's json.dumps(ensure_ascii=False), indent < 0 for the one-line form.
  std::string to_json(int indent = -1) const;
  const char* type_name() const;

 private:
  static Value make(Kind k) { Value v; v.kind = k; return v; }
};

bool operator==(const Value& a, const Value& b);

}  // namespace kvserve::jinja
