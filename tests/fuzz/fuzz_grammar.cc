// libFuzzer target for the grammar engine: the first byte picks GBNF, a regular expression or a
// JSON Schema, the rest is its text. Compiling may refuse (GrammarError) but must never crash,
// hang or read out of bounds; what compiles is matched for a few steps over a small vocabulary
// (masks, accepts and a rollback), so matching is fuzzed too.
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace {

std::shared_ptr<const kvserve::grammar::TokenIndex> vocab() {
  std::vector<std::string> bytes = {""};
  for (int b = 1; b < 256; ++b) bytes.push_back(std::string(1, static_cast<char>(b)));
  for (const char* p : {"{\"", "\":", "\",\"", "\"}", "ab", "true", "12", "\xC3\xA9", "\\n", "]}", "null"}) bytes.push_back(p);
  return std::make_shared<const kvserve::grammar::TokenIndex>(std::move(bytes), std::vector<int32_t>{0});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kvserve::grammar;
  if (size < 1 || size > 4096) return 0;
  static const auto index = vocab();
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    RuleSet rules;
    switch (data[0] % 3) {
      case 0:
        rules = parse_gbnf(text);
        break;
      case 1:
        rules.add("root", parse_regex(text, {.json_string = (data[0] & 4) != 0}));
        break;
      default: {
        const nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text, nullptr, false);
        if (schema.is_discarded()) return 0;
        rules = json_schema_rules(schema);
      }
    }
    auto g = std::make_shared<CompiledGrammar>(Grammar::compile(rules), index);
    GrammarMatcher m(g);
    std::vector<uint64_t> mask;
    uint32_t pick = data[0];
    for (int step = 0; step < 16 && !m.ended(); ++step) {
      m.fill_mask(mask);
      std::vector<int32_t> allowed;
      for (int32_t t = 0; t < index->vocab_size(); ++t)
        if ((mask[t >> 6] >> (t & 63)) & 1) allowed.push_back(t);
      if (allowed.empty()) break;
      pick = pick * 1103515245u + 12345u;
      if (!m.accept(allowed[pick % allowed.size()])) __builtin_trap();  // a masked-in token must be accepted
    }
    m.rollback(m.accepted() / 2);
    m.fill_mask(mask);
  } catch (const GrammarError&) {
  }
  return 0;
}
