// Reasoning blocks apart from content, against llama.cpp's expected parses
// (../shared/chat-templates/tool-call-parses.json: every case without tool calls of the <think>
// formats), whole and streamed in pieces of every size; and a constraint that applies only
// after the block.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "answer_helpers.h"
#include "grammar/constraint.h"
#include "grammar/stacks.h"
#include "test_support.h"
#include "text/reasoning.h"

namespace kvserve {
namespace {

using testing::trimmed;

TEST(Reasoning, SplitsAsLlamaCppParsesWholeAndStreamed) {
  const std::string path = std::string(KVSERVE_SHARED_DIR) + "/chat-templates/tool-call-parses.json";
  KVSERVE_REQUIRE_SHARED_FILE(path);
  const nlohmann::json all = nlohmann::json::parse(testing::read_text(path));
  int checked = 0;
  for (const char* group : {"think-qwq", "think-hermes", "deepseek-r1", "qwen3.5", "deepseek-v3.1"}) {
    for (const nlohmann::json& c : all["groups"][group]["cases"]) {
      if (!c["expect"]["tool_calls"].empty()) continue;
      const std::string output = c["output"];
      if (output.find("<\xEF\xBD\x9C") != std::string::npos) continue;  // DeepSeek's tool markers
      const nlohmann::json& p = c["params"];
      bool inside = p.value("thinking_forced_open", false);
      if (c.contains("generation_prompt") && c["generation_prompt"].is_string())
        inside = prompt_opens_reasoning(c["generation_prompt"].get<std::string>());
      const std::string want_content = trimmed(c["expect"]["content"]);
      const std::string want_reasoning = trimmed(c["expect"].value("reasoning_content", ""));
      const ReasoningSplitter::Piece whole = split_reasoning(output, inside);
      EXPECT_EQ(whole.content, want_content) << c["id"];
      EXPECT_EQ(whole.reasoning, want_reasoning) << c["id"];
      for (size_t step = 1; step <= 9; ++step) {
        ReasoningSplitter s(inside);
        std::string content, reasoning;
        for (size_t i = 0; i < output.size(); i += step) {
          const ReasoningSplitter::Piece piece = s.push(std::string_view(output).substr(i, step));
          content += piece.content;
          reasoning += piece.reasoning;
        }
        const ReasoningSplitter::Piece rest = s.finish();
        EXPECT_EQ(trimmed(content + rest.content), want_content) << c["id"] << " in pieces of " << step;
        EXPECT_EQ(trimmed(reasoning + rest.reasoning), want_reasoning) << c["id"] << " in pieces of " << step;
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 5);
}

TEST(Reasoning, PromptsThatOpenABlock) {
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<|im_start|>assistant\n"));
  // A marker that never closes stays reasoning; text without one is content.
  EXPECT_EQ(split_reasoning("still thinking </thi", true).reasoning, "still thinking </thi");
  EXPECT_EQ(split_reasoning("<thinking> is a word", false).content, "<thinking> is a word");
  EXPECT_EQ(split_reasoning("  <think>a</think> b", false).reasoning, "a");
}

TEST(Reasoning, AConstraintAppliesAfterTheBlock) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::kJsonSchema;
  c.text = R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})";
  c.reasoning = 1;
  const grammar::Grammar inside = grammar::Grammar::compile(grammar::constraint_rules(c));
  EXPECT_TRUE(testing::grammar_matches(inside, "Let me see: {a: ?} </thin no.</think>\n\n{\"a\":1}"));
  EXPECT_TRUE(testing::grammar_matches(inside, "</think>{\"a\":-3}"));
  EXPECT_FALSE(testing::grammar_matches(inside, "{\"a\":1}"));
  EXPECT_FALSE(testing::grammar_matches(inside, "x</think>{\"a\":1}</think>"));
  EXPECT_FALSE(testing::grammar_matches(inside, "x</think>{\"b\":1}"));
  c.reasoning = 0;
  const grammar::Grammar may = grammar::Grammar::compile(grammar::constraint_rules(c));
  EXPECT_TRUE(testing::grammar_matches(may, "{\"a\":1}"));
  EXPECT_TRUE(testing::grammar_matches(may, "<think>hmm</think>\n{\"a\":1}"));
  EXPECT_FALSE(testing::grammar_matches(may, "hmm</think>{\"a\":1}"));
}

}  // namespace
}  // namespace kvserve
