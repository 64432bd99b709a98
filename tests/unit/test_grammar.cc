// The grammar engine against independent references: std::regex for patterns, brute force over
// code points for UTF-8 lowering and integer ranges, JSON validity by nlohmann's parser, and a
// naive per-token check (accept, then roll back) for every mask.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <regex>

#include "grammar/constraint.h"
#include "grammar/escapes.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace kvserve::grammar {
namespace {

// Whether the grammar matches all of s.
bool matches(const Grammar& g, const std::string& s) {
  StackPool pool(g);
  uint32_t st = pool.start();
  for (char c : s)
    if ((st = pool.step(st, static_cast<uint8_t>(c))) == StackPool::kDead) return false;
  return pool.complete(st);
}

Grammar from_regex(const std::string& p, const RegexOptions& o = {}) {
  RuleSet r;
  r.add("root", parse_regex(p, o));
  return Grammar::compile(r);
}

TEST(Utf8Lowering, EveryCodePointOfASetAndNoOtherIsMatched) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<CharRange> set;
    for (int k = 0; k < 5; ++k) {
      const uint32_t lo = rng() % 0x11000, hi = lo + rng() % (trial % 2 ? 0x40 : 0x3000);
      set.push_back({lo, std::min<uint32_t>(hi, kMaxCodePoint)});
    }
    set.push_back({0x10FF00, 0x10FFFF});
    const auto norm = normalize_ranges(set, trial == 5);
    RuleSet r;
    r.add("root", chars(norm));
    const Grammar g = Grammar::compile(r);
    auto in_set = [&](uint32_t cp) {
      for (const CharRange& x : norm)
        if (cp >= x.lo && cp <= x.hi) return true;
      return false;
    };
    for (uint32_t cp = 0; cp <= kMaxCodePoint; cp += (cp < 0x3000 ? 1 : 7)) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      std::string s;
      append_utf8(s, cp);
      ASSERT_EQ(matches(g, s), in_set(cp)) << "code point " << cp << " trial " << trial;
    }
    // Malformed sequences never match: a lone continuation byte, an overlong form, a surrogate.
    for (const char* bad : {"\x80", "\xC0\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80"}) EXPECT_FALSE(matches(g, bad));
  }
}

TEST(Regex, FullMatchesAgreeWithStdRegex) {
  const std::vector<std::string> patterns = {
      "abc", "a|b|cd", "a*b+c?", "(ab)*", "[a-c]{2,3}", "[^ab]x", "a{3}", "(a|bc){1,}d", "x(y(z)?)*",
      "\\d+\\.\\d{2}", "[\\w-]+", "\\s?a", "(?:ab|a)(?:bc|c)", "[ab-]*", "a.b", "^a(b|c)$", "[a-c]{0,2}b{2,}",
      "(a|b)*abb", "\\(x\\)", "a??b*?",
  };
  const std::string alphabet = "abcdxyz0123 .-_()\n";
  std::mt19937 rng(7);
  for (const std::string& p : patterns) {
    const Grammar g = from_regex(p);
    const std::regex re(p, std::regex::ECMAScript);
    int agreed = 0, matched = 0;
    for (int i = 0; i < 3000; ++i) {
      std::string s;
      const int n = static_cast<int>(rng() % 7);
      for (int k = 0; k < n; ++k) s += alphabet[rng() % (i < 1500 ? 6 : alphabet.size())];
      const bool want = std::regex_match(s, re);
      ASSERT_EQ(matches(g, s), want) << "pattern " << p << " text '" << s << "'";
      ++agreed;
      matched += want;
    }
    EXPECT_EQ(agreed, 3000);
    (void)matched;
  }
}

TEST(Regex, UnsupportedFeaturesAreRefusedByName) {
  for (const auto& [p, what] : std::vector<std::pair<std::string, std::string>>{
           {"(a)\\1", "backreferences"}, {"a(?=b)", "look-around"}, {"\\bword", "word boundaries"},
           {"(ab", "unclosed"}, {"a)", "unmatched"}, {"*a", "nothing to repeat"}, {"[b-a]", "out of order"},
           {"a{3,2}", "below"}, {"a$b", "'$'"}}) {
    try {
      (void)parse_regex(p);
      ADD_FAILURE() << p << " was accepted";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << p << ": " << e.what();
    }
  }
}

TEST(Regex, InAJsonStringSpecialCharactersAreEscaped) {
  const Grammar g = from_regex("a\"b\\\\c.", {.json_string = true});
  EXPECT_TRUE(matches(g, "a\\\"b\\\\cx"));
  EXPECT_TRUE(matches(g, "a\\\"b\\\\c\\t"));
  EXPECT_FALSE(matches(g, "a\"b\\\\cx"));
  EXPECT_FALSE(matches(g, "a\\\"b\\\\c\t"));
}

TEST(Gbnf, ParsesLlamaCppSyntax) {
  const Grammar g = Grammar::compile(parse_gbnf(R"g(
# arithmetic, as llama.cpp's example writes it
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)g"));
  EXPECT_TRUE(matches(g, "1+2= 3\n"));
  EXPECT_TRUE(matches(g, "(a*b)-c=x1\nq=2\n"));
  EXPECT_FALSE(matches(g, "1+2=3"));
  EXPECT_FALSE(matches(g, "1++2=3\n"));
  const Grammar h = Grammar::compile(parse_gbnf("root ::= \"x\"{2,4} [\\u00e9-\\u00ea] . \"\\x41\"?"));
  EXPECT_TRUE(matches(h, "xx\xC3\xA9\xE2\x82\xAC"));
  EXPECT_TRUE(matches(h, "xxxx\xC3\xAA" "bA"));
  EXPECT_FALSE(matches(h, "x\xC3\xA9z"));
  EXPECT_FALSE(matches(h, "xxxxx\xC3\xA9z"));
}

TEST(Gbnf, ErrorsNameTheProblemAndPlace) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"root ::= foo", "'foo' is used but not defined"},
      {"root ::= \"a", "unterminated string"},
      {"root ::= [a-", "unterminated character class"},
      {"root := \"a\"", "expected '::='"},
      {"rot ::= \"a\"", "no rule named 'root'"},
      {"root ::= root \"a\"", "can reach itself"},
      {"root ::= x\nx ::= \"a\"? root", "can reach itself"},
      {"root ::= (\"a\"?)*", "can reach itself"},
      {"root ::= \"a\"{5,2}", "below"},
      {"root ::= <think>", "token references"},
      {"root ::= \"a\" )", "expected the end of the line"},
  };
  for (const auto& [text, want] : bad) {
    try {
      (void)Grammar::compile(parse_gbnf(text));
      ADD_FAILURE() << text << " was accepted";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << text << ": " << e.what();
    }
  }
}

TEST(Gbnf, HostileGrammarsAreBounded) {
  std::string deep = "root ::= " + std::string(400, '(') + "\"a\"" + std::string(400, ')');
  EXPECT_THROW((void)parse_gbnf(deep), GrammarError);
  // Nested repetitions share their units (small); many wide ones pass the element limit.
  EXPECT_NO_THROW((void)Grammar::compile(parse_gbnf("root ::= (\"a\"{1000}){1000}{1000}")));
  std::string wide = "root ::= r0\n";
  for (int i = 0; i < 70; ++i) wide += "r" + std::to_string(i) + " ::= \"a\"{60000} r" + std::to_string(i + 1) + "\n";
  wide += "r70 ::= \"b\"\n";
  EXPECT_THROW((void)Grammar::compile(parse_gbnf(wide)), GrammarError);
  EXPECT_THROW((void)Grammar::compile(parse_gbnf("root ::= \"a\"{100001}")), GrammarError);
  // Ambiguity that multiplies parses: refused at matching time, never a hang.
  const Grammar g = Grammar::compile(parse_gbnf("root ::= x*\nx ::= \"a\" | \"a\" \"a\" | y\ny ::= \"a\"+"));
  StackPool pool(g);
  uint32_t st = pool.start();
  bool refused = false;
  try {
    for (int i = 0; i < 200; ++i) st = pool.step(st, 'a');
  } catch (const GrammarError&) {
    refused = true;
  }
  EXPECT_TRUE(refused || st != StackPool::kDead);
}

TEST(IntegerRange, MatchesExactlyTheIntegersInRange) {
  std::mt19937 rng(11);
  std::vector<std::pair<std::optional<int64_t>, std::optional<int64_t>>> cases = {
      {0, 9}, {1, 100}, {-5, 5}, {-120, -7}, {37, 4216}, {std::nullopt, -3}, {15, std::nullopt}, {std::nullopt, 250},
      {-99, std::nullopt}, {0, 0}, {999, 1000}};
  for (int i = 0; i < 10; ++i) {
    const int64_t a = static_cast<int64_t>(rng() % 20000) - 10000, b = a + static_cast<int64_t>(rng() % 3000);
    cases.emplace_back(a, b);
  }
  for (const auto& [lo, hi] : cases) {
    RuleSet r;
    r.add("root", integer_range(lo, hi));
    const Grammar g = Grammar::compile(r);
    const int64_t from = lo ? *lo - 150 : -12000, to = hi ? *hi + 150 : 12000;
    for (int64_t x = from; x <= to; ++x) {
      const bool in = (!lo || x >= *lo) && (!hi || x <= *hi);
      ASSERT_EQ(matches(g, std::to_string(x)), in) << x << " in [" << (lo ? *lo : -1) << ", " << (hi ? *hi : -1) << "]";
    }
    EXPECT_FALSE(matches(g, "007"));
    EXPECT_FALSE(matches(g, "-0"));
  }
}

Grammar from_schema(const char* schema) { return Grammar::compile(json_schema_rules(nlohmann::ordered_json::parse(schema))); }

TEST(JsonSchema, AcceptsValidInstancesAndRejectsInvalidOnes) {
  struct Case {
    const char* schema;
    std::vector<std::string> valid, invalid;
  };
  const std::vector<Case> cases = {
      {R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]})",
       {R"({"a":1})", R"({"a":-20,"b":"x\"y"})"},
       {R"({"b":"x"})", R"({"a":1,"c":2})", R"({"b":"x","a":1})", R"({"a":1.5})", R"({ "a":1})"}},
      {R"({"type":"object","properties":{"x":{"type":"boolean"},"y":{"type":"null"},"z":{"type":"number"}}})",
       {"{}", R"({"y":null})", R"({"x":true,"z":-1.5e3})", R"({"x":false,"y":null,"z":0})"},
       {R"({"y":null,"x":true})", R"({,"x":true})", R"({"x":true,})"}},
      {R"({"type":"array","items":{"enum":["red","green",3,null]},"minItems":1,"maxItems":3})",
       {R"(["red"])", R"([3,null,"green"])"}, {"[]", R"(["red","red","red","red"])", R"(["blue"])"}},
      {R"({"type":"array","prefixItems":[{"type":"integer"},{"const":"x"}],"items":false})",
       {R"([1,"x"])"}, {R"([1])", R"([1,"x",2])", R"(["x",1])"}},
      {R"({"type":"string","minLength":2,"maxLength":3})", {R"("ab")", R"("a\nc")", R"("\u00e9\u00e9")"},
       {R"("a")", R"("abcd")"}},
      {R"({"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"})", {R"("AB-123")"}, {R"("AB-12")", R"("ab-123")"}},
      {R"({"type":"string","format":"date"})", {R"("2024-02-28")", R"("1999-12-31")"},
       {R"("2024-02-30")", R"("2024-13-01")", R"("24-01-01")"}},
      {R"({"type":"string","format":"uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {R"("123e4567")"}},
      {R"({"anyOf":[{"type":"integer","minimum":10,"maximum":20},{"type":"string","enum":["none"]}]})",
       {"10", "20", R"("none")"}, {"9", "21", R"("some")"}},
      {R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/node"})",
       {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
       {R"({"v":1})", R"({"v":1,"next":{"v":2}})"}},
      {R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}})",
       {R"({"a":1,"b":"x"})", R"({"ab":"y"})", R"({"":"z"})"}, {R"({"a":1,"a":"x"})", R"({"b":1})"}},
      {R"({"type":["string","null"]})", {"null", R"("s")"}, {"1"}},
      {R"({"type":"integer","exclusiveMinimum":0,"exclusiveMaximum":3})", {"1", "2"}, {"0", "3"}},
      {"{}", {"1", R"({"a":[1,{"b":null}]})", R"("x")"}, {"{", "[1,]"}},
  };
  for (const Case& c : cases) {
    const Grammar g = from_schema(c.schema);
    for (const std::string& v : c.valid) EXPECT_TRUE(matches(g, v)) << c.schema << " should accept " << v;
    for (const std::string& v : c.invalid) EXPECT_FALSE(matches(g, v)) << c.schema << " should reject " << v;
  }
}

TEST(JsonSchema, RefusesWhatItDoesNotSupportNamingKeywordAndPlace) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"type":"object","properties":{"a":{"type":"string","contentEncoding":"base64"}}})",
       "keyword 'contentEncoding' is not supported at #/properties/a"},
      {R"({"patternProperties":{"a":{}}})", "keyword 'patternProperties'"},
      {R"({"type":"number","minimum":0})", "minimum of a number"},
      {R"({"type":"strin"})", "unknown type 'strin' at #/type"},
      {R"({"$ref":"#/$defs/missing"})", "does not resolve"},
      {R"({"$ref":"http://example.com/s.json"})", "only local references"},
      {R"({"type":"string","format":"hostname"})", "format 'hostname' is not supported"},
      {R"({"type":"string","pattern":"(a)\\1"})", "backreferences"},
      {R"({"type":"array","minItems":3,"maxItems":2})", "maxItems below minItems"},
      {R"({"type":"integer","minimum":5,"maximum":4})", "no integer"},
  };
  for (const auto& [schema, want] : bad) {
    try {
      (void)from_schema(schema.c_str());
      ADD_FAILURE() << schema << " was accepted";
    } catch (const GrammarError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << schema << ": " << e.what();
    }
  }
  std::string deep = "{}";
  for (int i = 0; i < 100; ++i) deep = R"({"type":"array","items":)" + deep + "}";
  EXPECT_THROW((void)from_schema(deep.c_str()), GrammarError);
}

TEST(JsonSchema, HugeEnumsCompileAndMatchWithoutBlowingUp) {
  nlohmann::ordered_json values = nlohmann::ordered_json::array();
  for (int i = 0; i < 20000; ++i) values.push_back("value-" + std::to_string(i * 7919 % 100003));
  const Grammar g = Grammar::compile(json_schema_rules({{"enum", values}}));
  EXPECT_TRUE(matches(g, "\"value-7919\""));
  EXPECT_FALSE(matches(g, "\"value-7918\""));
}

// A vocabulary of single bytes and random multi-byte pieces, with one end token (id 0).
std::shared_ptr<TokenIndex> test_vocab(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::string> bytes = {""};
  for (int b = 1; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  const std::vector<std::string> pieces = {"{\"", "\":", "\",\"", "\"}", "},", "[{", "]}", "true", "null", "12", ".5",
                                           "e+", "\\\"", "\\u00", "ab", "name", "\"name", "\xC3\xA9", "\xE2\x82",
                                           "\xAC\"", " ", ",\"", "}]", "\"a\":1", "-0"};
  for (const std::string& p : pieces) bytes.push_back(p);
  for (int i = 0; i < 200; ++i) {
    std::string s;
    const int n = 2 + static_cast<int>(rng() % 5);
    for (int k = 0; k < n; ++k) s += "ab\"{}[],:0123-.enulstr\\"[rng() % 24];
    bytes.push_back(s);
  }
  bytes.push_back("");  // a control token: never allowed
  return std::make_shared<TokenIndex>(std::move(bytes), std::vector<int32_t>{0});
}

// The naive mask: every token tried (accepted, then rolled back).
std::vector<uint64_t> naive_mask(GrammarMatcher& m, int32_t V) {
  std::vector<uint64_t> mask((V + 63) / 64, 0);
  for (int32_t t = 0; t < V; ++t)
    if (m.accept(t)) {
      mask[t >> 6] |= uint64_t{1} << (t & 63);
      m.rollback(1);
    }
  return mask;
}

TEST(Matcher, MasksEqualTheNaiveCheckAndRollbackRestoresThem) {
  const std::vector<const char*> schemas = {
      R"({"type":"object","properties":{"name":{"type":"string"},"n":{"type":"integer","minimum":-5,"maximum":500},"tags":{"type":"array","items":{"type":"string","maxLength":4}}},"required":["name","n"]})",
      R"({"type":"array","items":{"anyOf":[{"type":"number"},{"type":"boolean"},{"type":"null"},{"$ref":"#"}]},"maxItems":4})",
      R"({"type":"object","additionalProperties":{"type":"integer"}})",
  };
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    auto ix = test_vocab(seed);
    const int32_t V = ix->vocab_size();
    for (const char* schema : schemas) {
      auto cg = std::make_shared<CompiledGrammar>(from_schema(schema), ix);
      GrammarMatcher m(cg);
      std::mt19937 rng(seed * 31);
      std::vector<std::vector<uint64_t>> masks;
      std::string text;
      for (int step = 0; step < 120 && !m.ended(); ++step) {
        std::vector<uint64_t> mask;
        m.fill_mask(mask);
        ASSERT_EQ(mask, naive_mask(m, V)) << schema << " step " << step << " after '" << text << "'";
        masks.push_back(mask);
        std::vector<int32_t> allowed;
        for (int32_t t = 0; t < V; ++t)
          if ((mask[t >> 6] >> (t & 63)) & 1) allowed.push_back(t);
        ASSERT_FALSE(allowed.empty()) << schema << " dead end after '" << text << "'";
        // Prefer ending once possible, so that outputs finish.
        const bool can_end = (mask[0] & 1) != 0;
        const int32_t t = can_end && rng() % 2 ? 0 : allowed[rng() % allowed.size()];
        ASSERT_TRUE(m.accept(t));
        if (t != 0) text += ix->bytes(t);
      }
      if (m.ended()) {
        EXPECT_FALSE(nlohmann::json::parse(text, nullptr, false).is_discarded()) << text;
      }
      // Back to the start, a step at a time: each state's mask as it was.
      for (size_t k = masks.size(); k-- > 0;) {
        m.rollback(1);
        std::vector<uint64_t> mask;
        m.fill_mask(mask);
        ASSERT_EQ(mask, masks[k]) << "after rolling back to step " << k;
      }
    }
  }
}

TEST(Constraint, ChoicesAndJsonObjectCompile) {
  auto ix = test_vocab(9);
  GrammarCache cache(ix, 4);
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kChoice;
  c.choices = {"yes", "no", "maybe not"};
  auto g = cache.get(c);
  EXPECT_EQ(g, cache.get(c));  // cached
  EXPECT_TRUE(matches(g->grammar(), "maybe not"));
  EXPECT_FALSE(matches(g->grammar(), "maybe"));
  c.kind = OutputConstraint::Kind::kJsonObject;
  c.choices.clear();
  auto o = cache.get(c);
  EXPECT_TRUE(matches(o->grammar(), R"({"a":[1,2,{"b":"c"}]})"));
  EXPECT_FALSE(matches(o->grammar(), "[1]"));
  c.kind = OutputConstraint::Kind::kJsonSchema;
  c.text = "{not json";
  EXPECT_THROW((void)cache.get(c), GrammarError);
}

}  // namespace
}  // namespace kvserve::grammar
