// The parsed form of a template: expressions and the statements around them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "text/jinja/jinja_value.h"

namespace kvserve::jinja {

struct Expr;
using ExprP = std::shared_ptr<const Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // value
    kName,     // name
    kAttr,     // a[0].name
    kIndex,    // a[0][a[1]]
    kSlice,    // a[0][a[1]:a[2]:a[3]] (null parts are absent)
    kCall,     // a[0](args, kwargs)
    kFilter,   // a[0] | name(args, kwargs)
    kTest,     // a[0] is [not] name(args); op "not" when negated
    kUnary,    // op a[0]: "not", "-", "+"
    kBinary,   // a[0] op a[1]: or and == != < > <= >= in notin + - * / // % ** ~
    kCond,     // a[1] if a[0] else a[2] (a[2] may be null)
    kList,     // [a...] and tuples
    kDict,     // {a[0]: a[1], ...} pairs
  };
  Kind kind;
  Value value;
  std::string name, op;
  std::vector<ExprP> a;
  std::vector<std::pair<std::string, ExprP>> kwargs;
  int line = 0;
  int depth = 1;  // of the tree below (evaluation recurses this deep)
};

struct Node {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kBreak, kContinue, kMacro };
  Kind kind;
  std::string text;  // kText
  ExprP expr;        // kOutput, kSet (the value), kFor (the iterable)
  int line = 0;
  // kIf: (condition, body) per branch; the else branch's condition is null.
  std::vector<std::pair<ExprP, std::vector<Node>>> branches;
  // kFor: targets (one, or several to unpack), an optional filter, the body and else body.
  std::vector<std::string> targets;
  ExprP filter;
  std::vector<Node> body, else_body;
  // kSet: target name, and attribute for `set ns.attr = ...`. kMacro: target is the macro's
  // name, targets its parameters, defaults their default values (null: none), body its body.
  std::string target, attr;
  std::vector<ExprP> defaults;
};

// Parses a template (jinja_parse.cc); JinjaError naming the line.
std::vector<Node> parse_template(const std::string& source);

}  // namespace kvserve::jinja
