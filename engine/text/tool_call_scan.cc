#include "text/tool_call_scan.h"

#include <algorithm>
#include <initializer_list>

namespace kvserve::tool_calls {
namespace {

using ordered = nlohmann::ordered_json;
constexpr size_t npos = std::string_view::npos;
constexpr int kMaxJsonDepth = 128;  // deeper model output is not a call (and nlohmann recurses)

constexpr std::string_view kToolCall = "<tool_call>", kToolCallEnd = "</tool_call>";
constexpr std::string_view kFunction = "<function=", kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=", kParameterEnd = "</parameter>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
constexpr std::string_view kMistralCalls = "[TOOL_CALLS]", kMistralId = "[CALL_ID]", kMistralArgs = "[ARGS]";
constexpr std::string_view kDsCalls = "<｜tool▁calls▁begin｜>", kDsCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDsCall = "<｜tool▁call▁begin｜>", kDsCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDsSep = "<｜tool▁sep｜>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
size_t skip_space(std::string_view s, size_t i) {
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}
bool starts(std::string_view s, size_t i, std::string_view m) { return s.substr(i, m.size()) == m; }
// s[i..] is a proper, non-empty prefix of m, ending s (more text may complete it).
bool cut_short(std::string_view s, size_t i, std::string_view m) {
  return i < s.size() && s.size() - i < m.size() && m.substr(0, s.size() - i) == s.substr(i);
}

std::vector<std::string_view> markers(ToolFormat f) {
  switch (f) {
    case ToolFormat::kHermes:
    case ToolFormat::kQwenXml: return {kToolCall};
    case ToolFormat::kLlama3: return {kPythonTag};
    case ToolFormat::kMistral: return {kMistralCalls};
    case ToolFormat::kDeepSeek: return {kDsCalls, kDsCall};
    default: return {};
  }
}
// Formats whose call may be a bare JSON object that is the whole answer.
bool bare_json(ToolFormat f) { return f == ToolFormat::kLlama3 || f == ToolFormat::kGeneric; }

bool parse_json(std::string_view s, ordered* out) {
  *out = ordered::parse(s.begin(), s.end(), nullptr, false);
  return !out->is_discarded();
}

// The JSON value at s[i..] (after whitespace): its end, or the scan status to return.
Scan::Status json_at(std::string_view s, size_t i, bool final, size_t* end, ordered* value) {
  const size_t e = json_end(s, i);
  if (e == npos) return final ? Scan::kBad : Scan::kIncomplete;
  if (e == kBadJson || !parse_json(s.substr(i, e - i), value)) return Scan::kBad;
  *end = e;
  return Scan::kOk;
}

// {"name": ..., "arguments"|"parameters": {...}, "id"?: ...} as a call.
bool call_of(const ordered& j, ToolCall* call) {
  if (!j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
  call->name = j["name"].get<std::string>();
  if (call->name.empty()) return false;
  const char* key = j.contains("arguments") ? "arguments" : "parameters";
  call->arguments = arguments_text(j.contains(key) ? j[key] : ordered::object());
  if (j.contains("id") && j["id"].is_string()) call->id = j["id"].get<std::string>();
  return true;
}

const ordered* parameter_schema(const ordered& declared, const std::string& tool, const std::string& key) {
  if (!declared.is_array()) return nullptr;
  for (const ordered& t : declared) {
    const ordered* fn = t.is_object() && t.contains("function") ? &t["function"] : &t;
    if (!fn->is_object() || fn->value("name", "") != tool || !fn->contains("parameters")) continue;
    const ordered& p = (*fn)["parameters"];
    if (p.is_object() && p.contains("properties") && p["properties"].is_object() && p["properties"].contains(key))
      return &p["properties"][key];
  }
  return nullptr;
}

bool allows_type(const ordered& schema, const char* type) {
  if (!schema.is_object() || !schema.contains("type")) return false;
  const ordered& t = schema["type"];
  if (t.is_string()) return t == type;
  if (t.is_array()) return std::find(t.begin(), t.end(), ordered(type)) != t.end();
  return false;
}

// An XML parameter's value, typed as its schema says: a string parameter is the text itself;
// anything else is the text read as JSON when it is JSON.
ordered typed_value(std::string_view text, const ordered* schema) {
  if (schema && allows_type(*schema, "string")) {
    if (text == "null" && allows_type(*schema, "null")) return nullptr;
    return std::string(text);
  }
  ordered v;
  if (!text.empty() && parse_json(text, &v)) return v;
  return std::string(text);
}

// Qwen3-Coder's <function=NAME><parameter=KEY>VALUE</parameter>...</function> at s[i].
Scan xml_call(std::string_view s, size_t i, bool final, const ordered& declared, ToolCall* call) {
  Scan r;
  const Scan::Status more = final ? Scan::kBad : Scan::kIncomplete;
  const size_t gt = s.find('>', i + kFunction.size());
  if (gt == npos) return r.status = more, r;
  call->name = std::string(s.substr(i + kFunction.size(), gt - i - kFunction.size()));
  if (call->name.empty() || call->name.find_first_of("<\n") != std::string::npos) return r;
  ordered args = ordered::object();
  size_t k = gt + 1;
  for (;;) {
    k = skip_space(s, k);
    if (starts(s, k, kParameter)) {
      const size_t kgt = s.find('>', k + kParameter.size());
      if (kgt == npos) return r.status = more, r;
      const std::string key(s.substr(k + kParameter.size(), kgt - k - kParameter.size()));
      const size_t vend = s.find(kParameterEnd, kgt + 1);
      if (vend == npos) return r.status = more, r;
      std::string_view v = s.substr(kgt + 1, vend - kgt - 1);
      if (!v.empty() && v.front() == '\n') v.remove_prefix(1);
      if (!v.empty() && v.back() == '\n') v.remove_suffix(1);
      args[key] = typed_value(v, parameter_schema(declared, call->name, key));
      k = vend + kParameterEnd.size();
    } else if (starts(s, k, kFunctionEnd)) {
      k += kFunctionEnd.size();
      break;
    } else if (k >= s.size() || cut_short(s, k, kParameter) || cut_short(s, k, kFunctionEnd)) {
      return r.status = more, r;
    } else {
      return r;
    }
  }
  call->arguments = args.dump();
  r.status = Scan::kOk;
  r.end = k;
  return r;
}

// Closes a call with `close` after whitespace when it is there (a missing one is forgiven at
// the end of the answer).
Scan::Status closing(std::string_view s, size_t* k, std::string_view close, bool final) {
  const size_t j = skip_space(s, *k);
  if (starts(s, j, close)) {
    *k = j + close.size();
    return Scan::kOk;
  }
  if (j >= s.size() || cut_short(s, j, close)) return final ? Scan::kOk : Scan::kIncomplete;
  return Scan::kOk;  // text after the call without its close: the call stands, the text is content
}

Scan hermes(std::string_view s, size_t pos, bool final, const ordered& declared) {
  Scan r;
  const Scan::Status more = final ? Scan::kBad : Scan::kIncomplete;
  const size_t i = skip_space(s, pos + kToolCall.size());
  if (i >= s.size() || cut_short(s, i, kFunction)) return r.status = more, r;
  ToolCall call;
  size_t k = 0;
  if (starts(s, i, kFunction)) {
    Scan x = xml_call(s, i, final, declared, &call);
    if (x.status != Scan::kOk) return x;
    k = x.end;
  } else {
    ordered j;
    if ((r.status = json_at(s, i, final, &k, &j)) != Scan::kOk) return r;
    if (!call_of(j, &call)) return r.status = Scan::kBad, r;
  }
  if ((r.status = closing(s, &k, kToolCallEnd, final)) != Scan::kOk) return r;
  r.calls.push_back(std::move(call));
  r.end = k;
  return r;
}

// A Python literal in NAME.call(key=VALUE, ...): a quoted string (with backslash escapes), or a
// number or True/False/None as JSON.
bool python_value(std::string_view s, size_t* i, ordered* out) {
  if (*i >= s.size()) return false;
  const char q = s[*i];
  if (q == '"' || q == '\'') {
    std::string v;
    for (size_t k = *i + 1; k < s.size(); ++k) {
      if (s[k] == '\\' && k + 1 < s.size()) {
        const char e = s[++k];
        v += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else if (s[k] == q) {
        *out = v;
        *i = k + 1;
        return true;
      } else {
        v += s[k];
      }
    }
    return false;
  }
  size_t k = *i;
  while (k < s.size() && s[k] != ',' && s[k] != ')') ++k;
  std::string word(s.substr(*i, k - *i));
  while (!word.empty() && is_space(word.back())) word.pop_back();
  if (word == "True") *out = true;
  else if (word == "False") *out = false;
  else if (word == "None") *out = nullptr;
  else if (!parse_json(word, out) || !out->is_number()) return false;
  *i = k;
  return true;
}

bool is_ident(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

Scan llama3(std::string_view s, size_t pos, bool final) {
  Scan r;
  const Scan::Status more = final ? Scan::kBad : Scan::kIncomplete;
  size_t i = pos;
  const bool tagged = starts(s, pos, kPythonTag);
  if (tagged) i = skip_space(s, pos + kPythonTag.size());
  if (i >= s.size()) return r.status = more, r;
  ToolCall call;
  if (s[i] == '{') {
    ordered j;
    size_t k = 0;
    if ((r.status = json_at(s, i, final, &k, &j)) != Scan::kOk) return r;
    if (!call_of(j, &call)) return r.status = Scan::kBad, r;
    r.calls.push_back(std::move(call));
    r.end = k;
    return r;
  }
  if (!tagged) return r;
  // <|python_tag|>NAME.call(key="value", ...): it runs to the end of the answer.
  if (!final) return r.status = Scan::kIncomplete, r;
  size_t k = i;
  while (k < s.size() && is_ident(s[k])) ++k;
  call.name = std::string(s.substr(i, k - i));
  if (call.name.empty() || !starts(s, k, ".call(")) return r;
  k += 6;
  ordered args = ordered::object();
  for (;;) {
    k = skip_space(s, k);
    if (k < s.size() && s[k] == ')') {
      ++k;
      break;
    }
    const size_t key0 = k;
    while (k < s.size() && is_ident(s[k])) ++k;
    const std::string key(s.substr(key0, k - key0));
    k = skip_space(s, k);
    if (key.empty() || k >= s.size() || s[k] != '=') return r;
    k = skip_space(s, k + 1);
    ordered v;
    if (!python_value(s, &k, &v)) return r;
    args[key] = v;
    k = skip_space(s, k);
    if (k < s.size() && s[k] == ',') ++k;
  }
  call.arguments = args.dump();
  r.calls.push_back(std::move(call));
  r.status = Scan::kOk;
  r.end = k;
  return r;
}

Scan mistral(std::string_view s, size_t pos, bool final) {
  Scan r;
  const Scan::Status more = final ? Scan::kBad : Scan::kIncomplete;
  size_t i = skip_space(s, pos + kMistralCalls.size());
  if (i >= s.size()) return r.status = more, r;
  if (s[i] == '[') {  // Nemo: a JSON array of calls
    ordered j;
    size_t k = 0;
    if ((r.status = json_at(s, i, final, &k, &j)) != Scan::kOk) return r;
    if (!j.is_array() || j.empty()) return r.status = Scan::kBad, r;
    for (const ordered& c : j) {
      ToolCall call;
      if (!call_of(c, &call)) return r.status = Scan::kBad, r;
      r.calls.push_back(std::move(call));
    }
    r.end = k;
    return r;
  }
  ToolCall call;
  const size_t bracket = s.find('[', i);
  if (bracket == npos) return r.status = (s.size() - i < 256 ? more : Scan::kBad), r;
  call.name = std::string(s.substr(i, bracket - i));
  if (call.name.empty() || !std::all_of(call.name.begin(), call.name.end(), [](char c) { return is_ident(c) || c == '-' || c == '.'; }))
    return r;
  size_t k = bracket;
  if (cut_short(s, k, kMistralId) || cut_short(s, k, kMistralArgs)) return r.status = more, r;
  if (starts(s, k, kMistralId)) {
    const size_t args = s.find(kMistralArgs, k + kMistralId.size());
    if (args == npos) return r.status = more, r;
    call.id = std::string(s.substr(k + kMistralId.size(), args - k - kMistralId.size()));
    k = args;
  }
  if (!starts(s, k, kMistralArgs)) return r;
  ordered j;
  if ((r.status = json_at(s, k + kMistralArgs.size(), final, &k, &j)) != Scan::kOk) return r;
  call.arguments = arguments_text(j);
  r.calls.push_back(std::move(call));
  r.end = k;
  return r;
}

// DeepSeek's block of calls: each NAME<sep>JSON (V3.1) or TYPE<sep>NAME\n```json\nJSON``` (R1).
Scan deepseek(std::string_view s, size_t pos, bool final) {
  Scan r;
  const Scan::Status more = final ? Scan::kBad : Scan::kIncomplete;
  size_t k = starts(s, pos, kDsCalls) ? pos + kDsCalls.size() : pos;
  for (;;) {
    k = skip_space(s, k);
    if (starts(s, k, kDsCallsEnd)) {
      k += kDsCallsEnd.size();
      break;
    }
    if (k >= s.size() || cut_short(s, k, kDsCall) || cut_short(s, k, kDsCallsEnd)) {
      if (!final) return r.status = Scan::kIncomplete, r;
      break;
    }
    if (!starts(s, k, kDsCall)) break;  // text after the calls
    const size_t sep = s.find(kDsSep, k + kDsCall.size());
    if (sep == npos) return r.status = more, r;
    ToolCall call;
    std::string head(s.substr(k + kDsCall.size(), sep - k - kDsCall.size()));
    size_t j = skip_space(s, sep + kDsSep.size());
    if (j >= s.size()) return r.status = more, r;
    ordered args;
    if (s[j] == '{') {
      call.name = head;
      if ((r.status = json_at(s, j, final, &k, &args)) != Scan::kOk) return r;
    } else {
      const size_t nl = s.find('\n', j);
      if (nl == npos) return r.status = more, r;
      call.name = std::string(s.substr(j, nl - j));
      size_t f = skip_space(s, nl);
      if (f >= s.size() || cut_short(s, f, "```json")) return r.status = more, r;
      if (!starts(s, f, "```json")) return r.status = Scan::kBad, r;
      if ((r.status = json_at(s, f + 7, final, &k, &args)) != Scan::kOk) return r;
      if ((r.status = closing(s, &k, "```", final)) != Scan::kOk) return r;
    }
    if (call.name.empty()) return r.status = Scan::kBad, r;
    call.arguments = arguments_text(args);
    r.calls.push_back(std::move(call));
    if ((r.status = closing(s, &k, kDsCallEnd, final)) != Scan::kOk) return r;
  }
  if (r.calls.empty()) return r.status = Scan::kBad, r;
  r.status = Scan::kOk;
  r.end = k;
  return r;
}

// The generic form: {"tool_calls": [...]}, {"tool_call": {...}} or {"response": "..."}.
Scan generic(std::string_view s, size_t pos, bool final) {
  Scan r;
  ordered j;
  size_t k = 0;
  if ((r.status = json_at(s, pos, final, &k, &j)) != Scan::kOk) return r;
  r.status = Scan::kBad;
  if (!j.is_object()) return r;
  if (j.contains("tool_calls") && j["tool_calls"].is_array() && !j["tool_calls"].empty()) {
    for (const ordered& c : j["tool_calls"]) {
      ToolCall call;
      if (!call_of(c, &call)) return r;
      r.calls.push_back(std::move(call));
    }
  } else if (j.contains("tool_call")) {
    ToolCall call;
    if (!call_of(j["tool_call"], &call)) return r;
    r.calls.push_back(std::move(call));
  } else if (j.size() == 1 && j.contains("response") && j["response"].is_string()) {
    r.content = j["response"].get<std::string>();
  } else {
    return r;
  }
  r.status = Scan::kOk;
  r.end = k;
  return r;
}

}  // namespace

size_t json_end(std::string_view s, size_t pos) {
  size_t i = skip_space(s, pos);
  if (i >= s.size()) return npos;
  const char c = s[i];
  if (c == '{' || c == '[' || c == '"') {
    int depth = 0;
    bool in_string = false, escaped = false;
    for (; i < s.size(); ++i) {
      const char ch = s[i];
      if (in_string) {
        if (escaped) escaped = false;
        else if (ch == '\\') escaped = true;
        else if (ch == '"') {
          in_string = false;
          if (depth == 0) return i + 1;
        }
        continue;
      }
      if (ch == '"') {
        in_string = true;
      } else if (ch == '{' || ch == '[') {
        if (++depth > kMaxJsonDepth) return kBadJson;
      } else if (ch == '}' || ch == ']') {
        if (--depth == 0) return i + 1;
        if (depth < 0) return kBadJson;
      }
    }
    return npos;
  }
  if (c == '-' || std::isdigit(static_cast<unsigned char>(c)) || c == 't' || c == 'f' || c == 'n') {
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '-' || s[i] == '+' || s[i] == '.'))
      ++i;
    return i == s.size() ? npos : i;
  }
  return kBadJson;
}

std::string arguments_text(const ordered& args) {
  if (args.is_string()) {
    ordered parsed;
    const std::string& text = args.get_ref<const std::string&>();
    if (parse_json(text, &parsed) && json_end(text, 0) != kBadJson) return parsed.dump();
    return text;
  }
  return args.is_null() ? "{}" : args.dump();
}

Marker find_start(ToolFormat f, std::string_view s, bool at_start) {
  Marker best;
  for (std::string_view m : markers(f)) {
    const size_t p = s.find(m);
    if (p != npos && p < best.pos) best = {p, m.size()};
  }
  if (at_start && bare_json(f)) {
    const size_t i = skip_space(s, 0);
    if (i < s.size() && s[i] == '{' && i < best.pos) best = {i, 0};
  }
  return best;
}

size_t partial_start(ToolFormat f, std::string_view s, bool at_start) {
  if (at_start && bare_json(f) && skip_space(s, 0) == s.size()) return s.size();
  size_t keep = 0;
  for (std::string_view m : markers(f))
    for (size_t n = std::min(s.size(), m.size() - 1); n > keep; --n)
      if (s.substr(s.size() - n) == m.substr(0, n)) {
        keep = n;
        break;
      }
  return keep;
}

Scan scan(ToolFormat f, std::string_view s, size_t pos, bool final, const ordered& declared) {
  switch (f) {
    case ToolFormat::kHermes:
    case ToolFormat::kQwenXml: return hermes(s, pos, final, declared);
    case ToolFormat::kLlama3: return llama3(s, pos, final);
    case ToolFormat::kMistral: return mistral(s, pos, final);
    case ToolFormat::kDeepSeek: return deepseek(s, pos, final);
    case ToolFormat::kGeneric: return generic(s, pos, final);
    case ToolFormat::kHarmony: break;
  }
  return {};
}

}  // namespace kvserve::tool_calls
