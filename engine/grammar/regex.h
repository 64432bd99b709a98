// Regular expressions (the common subset of Python's re and ECMAScript that JSON Schema's
// `pattern` and vLLM's `regex` constraint use) as grammar nodes: literals and escapes, classes,
// `.`, groups, alternation, greedy or lazy quantifiers; ^ and $ only at the ends. A pattern
// matches the whole text (as vLLM and XGrammar read it). Backreferences, look-around and word
// boundaries are refused.
#pragma once

#include <string_view>

#include "grammar/grammar_ast.h"

namespace kvserve::grammar {

struct RegexOptions {
  // Matching the decoded contents of a JSON string: characters JSON must escape (", \ and the
  // controls) are written as their escapes.
  bool json_string = false;
};

// Throws GrammarError with the offset of a syntax error.
Node parse_regex(std::string_view pattern, const RegexOptions& options = {});

// The code point set as JSON string contents: the characters that need no escape as one class,
// the others as their escapes.
Node json_string_chars(const std::vector<CharRange>& set);

}  // namespace kvserve::grammar
