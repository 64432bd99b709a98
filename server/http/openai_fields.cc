#include "http/openai_fields.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "core/json_body.h"

namespace kvserve {
namespace {

using nlohmann::json;

ServiceStatus invalid(const std::string& message) { return {ServiceCode::kInvalidArgument, message}; }

// A schema given as an object or as JSON text (vLLM accepts both).
ServiceStatus schema_text(const json& v, const std::string& field, std::string* out) {
  if (v.is_object() || v.is_boolean()) {
    *out = v.dump();
    return {};
  }
  if (v.is_string()) {
    const json parsed = json::parse(v.get<std::string>(), nullptr, false);
    if (parsed.is_discarded() || !(parsed.is_object() || parsed.is_boolean()))
      return invalid(field + ": expected a JSON Schema (an object, or its JSON text)");
    *out = parsed.dump();
    return {};
  }
  return invalid(field + ": expected a JSON Schema object, got " + json_brief(v));
}

ServiceStatus string_field(const json& v, const std::string& field, std::string* out) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty()) return invalid(field + ": expected a non-empty string");
  *out = v.get<std::string>();
  return {};
}

ServiceStatus choices(const json& v, const std::string& field, std::vector<std::string>* out) {
  if (!v.is_array() || v.empty()) return invalid(field + ": expected a non-empty array of strings");
  for (const json& x : v) {
    if (!x.is_string()) return invalid(field + ": expected a non-empty array of strings");
    out->push_back(x.get<std::string>());
  }
  return {};
}

ServiceStatus response_format(const json& rf, OutputConstraint* c) {
  if (!rf.is_object()) return invalid("response_format: expected an object with a type");
  auto type = rf.find("type");
  if (type == rf.end() || !type->is_string()) return invalid("response_format.type: required: text, json_object or json_schema");
  const std::string t = type->get<std::string>();
  if (t == "text") return {};
  if (t == "json_object") {
    if (auto s = rf.find("schema"); s != rf.end() && !s->is_null()) {  // llama.cpp's extension
      c->kind = OutputConstraint::Kind::kJsonSchema;
      return schema_text(*s, "response_format.schema", &c->text);
    }
    c->kind = OutputConstraint::Kind::kJsonObject;
    return {};
  }
  if (t == "json_schema") {
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object()) return invalid("response_format.json_schema: required, an object with a schema");
    for (const auto& [k, v] : js->items())
      if (k != "name" && k != "schema" && k != "strict" && k != "description")
        return invalid("response_format.json_schema." + k + ": unknown field");
    if (auto n = js->find("name"); n != js->end() && !n->is_string())
      return invalid("response_format.json_schema.name: expected a string");
    if (auto st = js->find("strict"); st != js->end() && !st->is_null() && !st->is_boolean())
      return invalid("response_format.json_schema.strict: expected true or false");
    auto s = js->find("schema");
    if (s == js->end() || s->is_null()) return invalid("response_format.json_schema.schema: required");
    c->kind = OutputConstraint::Kind::kJsonSchema;
    return schema_text(*s, "response_format.json_schema.schema", &c->text);
  }
  return invalid("response_format.type: " + json_brief(*type) + " is not one of text, json_object, json_schema");
}

ServiceStatus structured_outputs(const json& so, OutputConstraint* c) {
  if (!so.is_object()) return invalid("structured_outputs: expected an object");
  int given = 0;
  for (const auto& [k, v] : so.items()) {
    if (v.is_null()) continue;
    const std::string f = "structured_outputs." + k;
    ServiceStatus st;
    if (k == "json") {
      c->kind = OutputConstraint::Kind::kJsonSchema;
      st = schema_text(v, f, &c->text);
    } else if (k == "regex") {
      c->kind = OutputConstraint::Kind::kRegex;
      st = string_field(v, f, &c->text);
    } else if (k == "choice") {
      c->kind = OutputConstraint::Kind::kChoice;
      st = choices(v, f, &c->choices);
    } else if (k == "grammar") {
      c->kind = OutputConstraint::Kind::kGrammar;
      st = string_field(v, f, &c->text);
    } else if (k == "json_object") {
      if (!v.is_boolean()) return invalid(f + ": expected true or false");
      if (!v.get<bool>()) continue;
      c->kind = OutputConstraint::Kind::kJsonObject;
    } else if (k == "disable_any_whitespace" || k == "disable_fallback" || k == "disable_additional_properties") {
      continue;  // compact JSON, no fallback and no additional properties are what is done anyway
    } else {
      return invalid(f + ": not supported (json, regex, choice, grammar or json_object)");
    }
    if (!st.ok()) return st;
    ++given;
  }
  if (given > 1) return invalid("structured_outputs: give one of json, regex, choice, grammar, json_object");
  return {};
}

}  // namespace

ServiceStatus parse_output_constraint(const json& body, OutputConstraint* out, std::string* field) {
  struct Source {
    const char* name;
    ServiceStatus (*read)(const json&, OutputConstraint*);
  };
  static const Source sources[] = {
      {"response_format", response_format},
      {"structured_outputs", structured_outputs},
      {"guided_json",
       [](const json& v, OutputConstraint* c) {
         c->kind = OutputConstraint::Kind::kJsonSchema;
         return schema_text(v, "guided_json", &c->text);
       }},
      {"guided_regex",
       [](const json& v, OutputConstraint* c) {
         c->kind = OutputConstraint::Kind::kRegex;
         return string_field(v, "guided_regex", &c->text);
       }},
      {"guided_choice",
       [](const json& v, OutputConstraint* c) {
         c->kind = OutputConstraint::Kind::kChoice;
         return choices(v, "guided_choice", &c->choices);
       }},
      {"guided_grammar",
       [](const json& v, OutputConstraint* c) {
         c->kind = OutputConstraint::Kind::kGrammar;
         return string_field(v, "guided_grammar", &c->text);
       }},
      {"json_schema",  // llama.cpp's server
       [](const json& v, OutputConstraint* c) {
         c->kind = OutputConstraint::Kind::kJsonSchema;
         return schema_text(v, "json_schema", &c->text);
       }},
      {"grammar",  // llama.cpp's server
       [](const json& v, OutputConstraint* c) {
         c->kind = OutputConstraint::Kind::kGrammar;
         return string_field(v, "grammar", &c->text);
       }},
  };
  std::string first;
  for (const Source& s : sources) {
    auto it = body.find(s.name);
    if (it == body.end() || it->is_null()) continue;
    OutputConstraint c;
    if (ServiceStatus st = s.read(*it, &c); !st.ok()) return st;
    if (!c.active()) continue;  // response_format text
    if (!first.empty()) return invalid(std::string(s.name) + ": only one constraint per request (" + first + " is given too)");
    first = s.name;
    *out = std::move(c);
  }
  *field = first;
  return {};
}

void keep_schema_order(std::string_view raw_body, const std::string& field, OutputConstraint* c) {
  if (c->kind != OutputConstraint::Kind::kJsonSchema) return;
  using ordered = nlohmann::ordered_json;
  const ordered body = ordered::parse(raw_body, nullptr, false);
  if (body.is_discarded() || !body.is_object() || !body.contains(field)) return;
  const ordered* node = &body[field];
  if (field == "response_format" && node->is_object()) {
    if (node->contains("json_schema") && (*node)["json_schema"].is_object() && (*node)["json_schema"].contains("schema")) {
      node = &(*node)["json_schema"]["schema"];
    } else if (node->contains("schema")) {
      node = &(*node)["schema"];
    } else {
      return;
    }
  } else if (field == "structured_outputs" && node->is_object()) {
    if (!node->contains("json")) return;
    node = &(*node)["json"];
  }
  if (node->is_string()) {
    const ordered parsed = ordered::parse(node->get<std::string>(), nullptr, false);
    if (!parsed.is_discarded()) c->text = parsed.dump();
  } else if (node->is_object()) {
    c->text = node->dump();
  }
}

ServiceStatus parse_logit_bias(const json& body, int32_t vocab_size, std::vector<std::pair<int32_t, float>>* out) {
  auto it = body.find("logit_bias");
  if (it == body.end() || it->is_null()) return {};
  auto add = [&](const json& id, const json& bias) -> ServiceStatus {
    int64_t t = -1;
    if (id.is_number_integer()) {
      t = id.get<int64_t>();
    } else if (id.is_string()) {
      const std::string& s = id.get_ref<const std::string&>();
      if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string::npos)
        return invalid("logit_bias: keys must be token ids, got " + json_brief(id));
      t = std::stoll(s);
    } else {
      return invalid("logit_bias: keys must be token ids, got " + json_brief(id));
    }
    if (t < 0 || t >= vocab_size)
      return invalid("logit_bias: token " + std::to_string(t) + " is outside the vocabulary (0.." +
                     std::to_string(vocab_size - 1) + ")");
    float b = 0;
    if (bias.is_boolean() && !bias.get<bool>()) {
      b = -100.0f;
    } else if (bias.is_number() && bias.get<double>() >= -100.0 && bias.get<double>() <= 100.0) {
      b = bias.get<float>();
    } else {
      return invalid("logit_bias: values must be numbers from -100 to 100, got " + json_brief(bias));
    }
    out->emplace_back(static_cast<int32_t>(t), b);
    return {};
  };
  if (it->is_object()) {
    for (const auto& [k, v] : it->items())
      if (ServiceStatus st = add(json(k), v); !st.ok()) return st;
    return {};
  }
  if (it->is_array()) {
    for (const json& pair : *it) {
      if (!pair.is_array() || pair.size() != 2) return invalid("logit_bias: expected an object or [[id, bias], ...]");
      if (ServiceStatus st = add(pair[0], pair[1]); !st.ok()) return st;
    }
    return {};
  }
  return invalid("logit_bias: expected an object of token id to bias");
}

ServiceStatus check_fields(const json& body, bool chat) {
  static const std::set<std::string> common = {
      "model", "max_tokens", "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty",
      "repetition_penalty", "seed", "n", "stop", "stream", "stream_options", "logprobs", "user", "cache_salt",
      "ignore_eos", "response_format", "structured_outputs", "guided_json", "guided_regex", "guided_choice",
      "guided_grammar", "guided_decoding_backend", "json_schema", "grammar", "logit_bias", "speculative",
      // Accepted and without effect here: OpenAI's storage, tiering and caching hints.
      "store", "metadata", "service_tier", "prompt_cache_key", "safety_identifier"};
  static const std::set<std::string> chat_only = {"messages", "max_completion_tokens", "top_logprobs",
                                                   "chat_template_kwargs", "add_generation_prompt", "tools",
                                                   "tool_choice", "parallel_tool_calls"};
  static const std::set<std::string> completion_only = {"prompt", "echo", "best_of"};
  for (const auto& [k, v] : body.items()) {
    if (common.count(k) || (chat ? chat_only : completion_only).count(k)) continue;
    if (v.is_null()) continue;  // clients send unset optional fields as null
    if (k == "functions" || k == "function_call") {
      if (k == "functions" && v.is_array() && v.empty()) continue;
      return invalid(k + ": the deprecated functions API is not served; send tools and tool_choice");
    }
    if (!chat && (k == "tools" || k == "tool_choice" || k == "parallel_tool_calls"))
      return invalid(k + ": tools are called through /v1/chat/completions");
    // A name that is no plain identifier is quoted after "body", so that the message still
    // starts with the field it is about.
    const bool plain = !k.empty() && k.size() <= 64 && std::all_of(k.begin(), k.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
    });
    if (!plain) return invalid("body: the field " + json_brief(json(k)) + " is not supported by this server");
    return invalid(k + ": not supported by this server");
  }
  if (auto b = body.find("best_of"); b != body.end() && !b->is_null() && *b != 1)
    return invalid("best_of: only 1 is served");
  if (auto s = body.find("store"); s != body.end() && !s->is_null() && !s->is_boolean())
    return invalid("store: expected true or false");
  return {};
}

}  // namespace kvserve
