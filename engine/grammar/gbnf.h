// GBNF, llama.cpp's grammar format: `name ::= alternatives` rules with "literals", [classes],
// `.`, ( groups ), rule names, and the postfix operators * + ? {m} {m,} {m,n}; `#` comments; a
// rule ends at a line break outside parentheses. The start rule is `root`.
#pragma once

#include <string_view>

#include "grammar/grammar_ast.h"

namespace kvserve::grammar {

// Throws GrammarError naming the line and column of a syntax error.
RuleSet parse_gbnf(std::string_view text);

}  // namespace kvserve::grammar
