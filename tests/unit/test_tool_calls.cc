// Tool calls, content and reasoning taken out of model answers, against llama.cpp's expected
// parses (../shared/chat-templates/tool-call-parses.json, every case of every format), whole
// and streamed in pieces of 1 to 9 bytes; the format each shipped template implies; and cases
// of our own that the file does not hold (calls between text, broken calls as content).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "answer_helpers.h"
#include "gguf/gguf.h"
#include "grammar/token_index.h"
#include "runtime/engine.h"
#include "test_support.h"
#include "text/answer_parser.h"
#include "text/tokenizer.h"
#include "text/tool_call_scan.h"

namespace kvserve {
namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;
using testing::format_of_group;
using testing::trimmed;

std::string shared_template(const std::string& name) {
  return std::string(KVSERVE_SHARED_DIR) + "/chat-templates/" + name;
}

ReasoningMarkers markers_of_group(const std::string& g) {
  if (g == "mistral") return {"[THINK]", "[/THINK]"};
  if (g == "gpt-oss-harmony" || g == "llama3-json" || g == "hermes-json" || g == "qwen3-coder-xml") return {};
  return {"<think>", "</think>"};
}

AnswerFormat format_of_case(const std::string& group, const ordered& c) {
  AnswerFormat f;
  f.tools = format_of_group(group);
  f.parse_tools = true;
  f.reasoning = markers_of_group(group);
  const ordered& p = c["params"];
  if (p.contains("tools")) f.declared = p["tools"];
  // R1's templates always open the block; a format-level case says so in its params.
  f.reasoning_open = p.value("thinking_forced_open", group == "deepseek-r1");
  if (c.contains("generation_prompt") && c["generation_prompt"].is_string() && !f.reasoning.open.empty())
    f.reasoning_open = prompt_opens_reasoning(c["generation_prompt"].get<std::string>(), f.reasoning.open,
                                              f.reasoning.close);
  return f;
}

void expect_parsed(const ParsedAnswer& got, const ordered& want, const std::string& how) {
  SCOPED_TRACE(how);
  EXPECT_EQ(trimmed(got.content), trimmed(want.value("content", "")));
  EXPECT_EQ(trimmed(got.reasoning), trimmed(want.value("reasoning_content", "")));
  const ordered& calls = want["tool_calls"];
  ASSERT_EQ(got.calls.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_EQ(got.calls[i].name, calls[i]["name"].get<std::string>());
    EXPECT_EQ(got.calls[i].id, calls[i].value("id", ""));
    const ordered args = ordered::parse(got.calls[i].arguments, nullptr, false);
    EXPECT_EQ(args, ordered::parse(calls[i]["arguments"].get<std::string>())) << got.calls[i].arguments;
  }
}

ParsedAnswer streamed(const std::string& output, const AnswerFormat& f, size_t step) {
  AnswerParser p(f);
  ParsedAnswer all;
  const auto add = [&](ParsedAnswer&& x) {
    all.reasoning += x.reasoning;
    all.content += x.content;
    for (ToolCall& c : x.calls) all.calls.push_back(std::move(c));
  };
  for (size_t i = 0; i < output.size(); i += step) add(p.push(std::string_view(output).substr(i, step)));
  add(p.finish());
  return all;
}

TEST(ToolCalls, ParseAsLlamaCppDoesWholeAndStreamed) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_template("tool-call-parses.json"));
  const ordered all = ordered::parse(testing::read_text(shared_template("tool-call-parses.json")));
  int checked = 0;
  for (auto g = all["groups"].begin(); g != all["groups"].end(); ++g) {
    for (const ordered& c : g.value()["cases"]) {
      SCOPED_TRACE(c["id"].get<std::string>());
      const AnswerFormat f = format_of_case(g.key(), c);
      const std::string output = c["output"];
      expect_parsed(parse_answer(output, f), c["expect"], "whole");
      for (size_t step = 1; step <= 9; ++step)
        expect_parsed(streamed(output, f, step), c["expect"], "pieces of " + std::to_string(step));
      ++checked;
    }
  }
  EXPECT_GE(checked, 40);
}

// Each shipped template llama.cpp's cases name implies the format of its group.
TEST(ToolCalls, TemplatesImplyTheirFormat) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_template("tool-call-parses.json"));
  const ordered all = ordered::parse(testing::read_text(shared_template("tool-call-parses.json")));
  int checked = 0;
  for (auto g = all["groups"].begin(); g != all["groups"].end(); ++g)
    for (const ordered& c : g.value()["cases"]) {
      if (!c.contains("same_as_shipped") || !c["same_as_shipped"].is_string()) continue;
      const std::string source = testing::read_text(shared_template(c["same_as_shipped"].get<std::string>()));
      EXPECT_EQ(tool_format_name(detect_tool_format(source)), std::string(tool_format_name(format_of_group(g.key()))))
          << c["id"];
      ++checked;
    }
  EXPECT_GE(checked, 10);
  // The rest of the shipped templates, by what they write.
  const std::pair<const char*, ToolFormat> more[] = {
      {"deepseek-v3.1.jinja", ToolFormat::kDeepSeek}, {"deepseek-r1-distill-qwen.jinja", ToolFormat::kDeepSeek},
      {"qwen3.jinja", ToolFormat::kHermes},           {"granite-4.0.jinja", ToolFormat::kHermes},
      {"gemma-3-it.jinja", ToolFormat::kGeneric},     {"phi-3.5-mini-instruct.jinja", ToolFormat::kGeneric},
      {"mistral-7b-instruct-v0.3.jinja", ToolFormat::kMistral}};
  for (const auto& [file, format] : more)
    EXPECT_EQ(detect_tool_format(testing::read_text(shared_template(file))), format) << file;
}

AnswerFormat plain(ToolFormat f) {
  AnswerFormat a;
  a.tools = f;
  a.parse_tools = true;
  return a;
}

// Cases not in the file: text around calls, parallel calls, a broken call left as content, and
// markers cut at every byte.
TEST(ToolCalls, TextAroundCallsAndBrokenCalls) {
  const std::string two =
      "Checking both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": [1, {\"y\": \"}\"}]}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"b\", \"arguments\": \"{\\\"k\\\": true}\"}</tool_call>\nDone.";
  for (size_t step = 1; step <= 9; ++step) {
    const ParsedAnswer p = streamed(two, plain(ToolFormat::kHermes), step);
    EXPECT_EQ(p.content, "Checking both.\n\nDone.");
    ASSERT_EQ(p.calls.size(), 2u);
    EXPECT_EQ(p.calls[0].arguments, R"({"x":[1,{"y":"}"}]})");
    EXPECT_EQ(p.calls[1].name, "b");
    EXPECT_EQ(p.calls[1].arguments, R"({"k":true})");
  }
  // A call that never closes its JSON is the text it was.
  const std::string broken = "Sure <tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}";
  EXPECT_EQ(parse_answer(broken, plain(ToolFormat::kHermes)).content, broken);
  EXPECT_TRUE(parse_answer(broken, plain(ToolFormat::kHermes)).calls.empty());
  // JSON that is not a call, where a bare call could be, is content.
  for (ToolFormat f : {ToolFormat::kLlama3, ToolFormat::kGeneric}) {
    const ParsedAnswer p = parse_answer(R"({"answer": 42} and more)", plain(f));
    EXPECT_EQ(p.content, R"({"answer": 42} and more)");
    EXPECT_TRUE(p.calls.empty());
  }
  const ParsedAnswer g = parse_answer(R"({"tool_calls": [{"name": "f", "arguments": {"a": 1}}, {"name": "g", "arguments": {}}]})",
                                      plain(ToolFormat::kGeneric));
  ASSERT_EQ(g.calls.size(), 2u);
  EXPECT_EQ(g.calls[1].name, "g");
  EXPECT_EQ(parse_answer(R"({"response": "hi"})", plain(ToolFormat::kGeneric)).content, "hi");
  // Without tools declared nothing is parsed.
  AnswerFormat off = plain(ToolFormat::kHermes);
  off.parse_tools = false;
  EXPECT_EQ(parse_answer(two, off).content, trimmed(two));
  // Mistral's Nemo array with ids; DeepSeek's block with text before it.
  const ParsedAnswer m = parse_answer(R"([TOOL_CALLS][{"name": "f", "arguments": {"a": 1}, "id": "abcdefghi"}])",
                                      plain(ToolFormat::kMistral));
  ASSERT_EQ(m.calls.size(), 1u);
  EXPECT_EQ(m.calls[0].id, "abcdefghi");
  const ParsedAnswer d = parse_answer(
      "Let me look.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{\"q\": \"x\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
      plain(ToolFormat::kDeepSeek));
  EXPECT_EQ(d.content, "Let me look.");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, R"({"q":"x"})");
}

// Harmony takes the channels apart, with tools or without (a call then is dropped, not
// returned), and a stray plain answer is content.
TEST(ToolCalls, HarmonyChannels) {
  AnswerFormat h = plain(ToolFormat::kHarmony);
  const std::string out =
      "<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary to=functions.f "
      "<|constrain|>json<|message|>{\"a\": 1}<|call|>";
  for (size_t step = 1; step <= 9; ++step) {
    const ParsedAnswer p = streamed(out, h, step);
    EXPECT_EQ(p.reasoning, "Think.");
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].name, "f");
  }
  EXPECT_EQ(parse_answer("Just text.", h).content, "Just text.");
  h.parse_tools = false;
  EXPECT_TRUE(parse_answer(out, h).calls.empty());
  EXPECT_EQ(parse_answer(out, h).reasoning, "Think.");
}

TEST(ToolCalls, JsonEndFindsTheValueOrWaits) {
  using tool_calls::json_end;
  EXPECT_EQ(json_end(R"( {"a": "}"} x)", 0), 11u);
  EXPECT_EQ(json_end(R"({"a": [1, 2)", 0), std::string_view::npos);
  EXPECT_EQ(json_end("12", 0), std::string_view::npos);  // more digits may follow
  EXPECT_EQ(json_end("12,", 0), 2u);
  EXPECT_EQ(json_end("<x>", 0), tool_calls::kBadJson);
  EXPECT_EQ(json_end(std::string(1000, '['), 0), tool_calls::kBadJson);  // too deep to be a call
}

// Formats with control-token markers: with special_text the decoder writes a control token as
// its spelling (not one that ends generation), and the grammar's vocabulary spells it too.
TEST(ToolCalls, ControlTokensAreSpelledForSpecialText) {
  KVSERVE_REQUIRE_SHARED_FILE(testing::shared_model("stories260K.gguf"));
  GgufFile file(testing::shared_model("stories260K.gguf"));
  Tokenizer tok(file);
  ASSERT_EQ(tok.token_kind(tok.bos_id()), TokenKind::kControl);
  IncrementalDecoder plain_text(tok, {}), special(tok, {}, true);
  EXPECT_EQ(plain_text.push(tok.bos_id()), "");
  EXPECT_EQ(special.push(tok.bos_id()), tok.token_text(tok.bos_id()));
  EXPECT_EQ(special.push(tok.eos_id()), "");  // the end is no text
  EXPECT_EQ(make_token_index(tok)->bytes(tok.bos_id()), "");
  EXPECT_EQ(make_token_index(tok, true)->bytes(tok.bos_id()), tok.token_text(tok.bos_id()));
  EXPECT_EQ(make_token_index(tok, true)->bytes(tok.eos_id()), "");
}

}  // namespace
}  // namespace kvserve
