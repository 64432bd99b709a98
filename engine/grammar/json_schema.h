// JSON Schema to grammar, for the subset OpenAI's strict mode and vLLM accept: type (all seven,
// or a list), properties, required, additionalProperties (false, true or a schema; absent reads
// as false, as XGrammar's strict mode does), enum, const, anyOf, oneOf, allOf of one schema,
// items, prefixItems, minItems, maxItems, minLength, maxLength, pattern, format (date-time,
// date, time, uuid, email), $ref and $defs (recursion included), and minimum, maximum,
// exclusiveMinimum and exclusiveMaximum of integers. Annotations (title, description, ...) are
// ignored; any other keyword is refused, named with its place in the schema.
// Output is compact JSON: no whitespace between tokens, properties in the schema's order.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>

#include "grammar/grammar_ast.h"

namespace kvserve::grammar {

struct JsonSchemaLimits {
  int32_t max_depth = 64;  // nesting of schemas inside schemas
};

// Throws GrammarError: "json_schema: <what> at <JSON pointer>". An ordered_json, because the
// properties come out in the schema's order (as OpenAI's structured outputs promise).
RuleSet json_schema_rules(const nlohmann::ordered_json& schema, const JsonSchemaLimits& limits = {});

// Any JSON object (response_format {"type": "json_object"}).
RuleSet json_object_rules();

// Alternatives of literal strings as a trie (one way to match each prefix).
Node literal_trie(std::vector<std::string> words);

// Integers in [lo, hi] (decimal, no leading zeros); an absent side is unbounded.
Node integer_range(std::optional<int64_t> lo, std::optional<int64_t> hi);

}  // namespace kvserve::grammar
