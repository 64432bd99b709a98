// Tool calls as OpenAI's clients read them: the chat answer's message.tool_calls and the
// streamed tool_calls deltas (index, id and name once, then the arguments) for every case of
// llama.cpp's expected parses (tool-call-parses.json), the same calls both ways, finish_reason
// "tool_calls"; the tool fields refused by name when malformed; and tool_choice "required" or
// a named tool as a grammar that admits exactly valid calls of the declared tools, in every
// format; "auto" as free text that becomes such calls at the marker.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "answer_helpers.h"
#include "gguf/gguf.h"
#include "grammar/constraint.h"
#include "grammar/stacks.h"
#include "http/openai_api.h"
#include "http/openai_tools.h"
#include "test_support.h"

namespace kvserve {
namespace {

using nlohmann::json;
using ordered = nlohmann::ordered_json;
using testing::format_of_group;
using testing::grammar_matches;
using testing::trimmed;

TEST(OpenAITools, MessageAndDeltasCarryTheSameCalls) {
  const std::string cases = std::string(KVSERVE_SHARED_DIR) + "/chat-templates/tool-call-parses.json";
  KVSERVE_REQUIRE_SHARED_FILE(cases);
  KVSERVE_REQUIRE_SHARED_FILE(testing::shared_model("stories260K.gguf"));
  GgufFile file(testing::shared_model("stories260K.gguf"));
  Tokenizer tok(file);
  const ordered all = ordered::parse(testing::read_text(cases));
  int checked = 0;
  for (auto g = all["groups"].begin(); g != all["groups"].end(); ++g) {
    for (const ordered& c : g.value()["cases"]) {
      SCOPED_TRACE(c["id"].get<std::string>());
      AnswerFormat f;
      f.tools = format_of_group(g.key());
      f.parse_tools = true;
      if (g.key() == "mistral") f.reasoning = {"[THINK]", "[/THINK]"};
      else if (g.key() != "gpt-oss-harmony") f.reasoning = {"<think>", "</think>"};
      f.reasoning_open = c["params"].value("thinking_forced_open", g.key() == "deepseek-r1");
      if (c["generation_prompt"].is_string() && !f.reasoning.open.empty())
        f.reasoning_open = prompt_opens_reasoning(c["generation_prompt"].get<std::string>(), f.reasoning.open, f.reasoning.close);
      if (c["params"].contains("tools")) f.declared = c["params"]["tools"];
      CompletionWriter whole("chatcmpl-x", "m", 0, tok, -1, true, f);
      CompletionWriter streamed("chatcmpl-x", "m", 0, tok, -1, true, f);
      const std::string output = c["output"];
      std::string sse;
      for (size_t i = 0; i < output.size(); i += 4) {
        Event e;
        e.text = output.substr(i, 4);
        whole.add(e);
        sse += streamed.stream_event(e, false);
      }
      Event last;
      last.completion = Completion{};
      last.completion->reason = FinishReason::kStop;
      whole.add(last);
      sse += streamed.stream_event(last, false);

      const json body = whole.body();
      const json& msg = body["choices"][0]["message"];
      const ordered& want = c["expect"]["tool_calls"];
      const json calls = msg.value("tool_calls", json::array());
      ASSERT_EQ(calls.size(), want.size()) << body.dump();
      EXPECT_EQ(body["choices"][0]["finish_reason"], want.empty() ? "stop" : "tool_calls");
      EXPECT_EQ(msg["content"].is_null() ? "" : trimmed(msg["content"]), trimmed(c["expect"]["content"]));
      // The stream: content and reasoning deltas, then per call a delta with its index, id,
      // type and name, and deltas with argument text.
      std::string content;
      json streamed_calls = json::array();
      std::string finish;
      for (const json& ch : testing::sse_chunks(sse)) {
        const json& choice = ch["choices"][0];
        if (choice["finish_reason"].is_string()) finish = choice["finish_reason"];
        const json& d = choice["delta"];
        content += d.value("content", "");
        for (const json& tc : d.value("tool_calls", json::array())) {
          const size_t i = tc["index"];
          if (i == streamed_calls.size()) {
            EXPECT_TRUE(tc.contains("id") && tc.contains("type") && tc["function"].contains("name")) << tc.dump();
            streamed_calls.push_back({{"id", tc["id"]}, {"type", tc["type"]},
                                      {"function", {{"name", tc["function"]["name"]}, {"arguments", ""}}}});
          }
          ASSERT_LT(i, streamed_calls.size());
          streamed_calls[i]["function"]["arguments"] =
              streamed_calls[i]["function"]["arguments"].get<std::string>() + tc["function"].value("arguments", "");
        }
      }
      EXPECT_EQ(finish, want.empty() ? "stop" : "tool_calls");
      EXPECT_EQ(trimmed(content), msg["content"].is_null() ? "" : msg["content"].get<std::string>());
      EXPECT_EQ(streamed_calls, calls);
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_EQ(calls[i]["function"]["name"], want[i]["name"]);
        EXPECT_EQ(ordered::parse(calls[i]["function"]["arguments"].get<std::string>()),
                  ordered::parse(want[i]["arguments"].get<std::string>()));
        const std::string id = want[i].value("id", "");
        if (!id.empty()) {
          EXPECT_EQ(calls[i]["id"], id);
        } else {
          EXPECT_FALSE(calls[i]["id"].get<std::string>().empty());
        }
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 40);
}

ServiceStatus fields(const std::string& body, ToolRequest* t) { return parse_tool_fields(ordered::parse(body), t); }

const char* kTools = R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
  {"type": "object", "properties": {"location": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
   "required": ["location"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
   "properties": {"tz": {"type": "string"}}, "required": ["tz"], "additionalProperties": false}}}])";

TEST(OpenAITools, MalformedFieldsAreRefusedByName) {
  ToolRequest t;
  const std::pair<std::string, std::string> bad[] = {
      {R"({"tools": {}})", "tools:"},
      {R"({"tools": [{"type": "retrieval"}]})", "tools[0].type:"},
      {R"({"tools": [{"type": "function"}]})", "tools[0].function:"},
      {R"({"tools": [{"type": "function", "function": {"name": "bad name"}}]})", "tools[0].function.name:"},
      {R"({"tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}]})", "tools[0].function.parameters:"},
      {R"({"tools": [{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]})",
       "tools[1].function.name:"},
      {R"({"tool_choice": "sometimes"})", "tool_choice:"},
      {R"({"tool_choice": "required"})", "tool_choice:"},
      {std::string("{") + kTools + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}}})",
       "tool_choice.function.name:"},
      {std::string("{") + kTools + R"(, "parallel_tool_calls": "yes"})", "parallel_tool_calls:"}};
  for (const auto& [body, field] : bad) {
    t = {};
    const ServiceStatus st = fields(body, &t);
    EXPECT_EQ(st.code, ServiceCode::kInvalidArgument) << body;
    EXPECT_EQ(st.message.rfind(field, 0), 0u) << st.message;
  }
  t = {};
  ASSERT_TRUE(fields(std::string("{") + kTools + R"(, "tool_choice": "none"})", &t).ok());
  EXPECT_FALSE(t.calls_possible());
}

// "required" admits a call of any declared tool with valid arguments (and, in parallel, several);
// a named tool admits that tool only; each admitted text parses back into its calls.
TEST(OpenAITools, RequiredAndNamedChoicesAdmitExactlyValidCalls) {
  for (ToolFormat f : {ToolFormat::kHermes, ToolFormat::kLlama3, ToolFormat::kGeneric, ToolFormat::kQwenXml,
                       ToolFormat::kMistral, ToolFormat::kHarmony, ToolFormat::kDeepSeek}) {
    SCOPED_TRACE(tool_format_name(f));
    ToolRequest t;
    ASSERT_TRUE(fields(std::string("{") + kTools + R"(, "tool_choice": "required"})", &t).ok());
    OutputConstraint c;
    ASSERT_TRUE(tool_choice_constraint(t, f, &c).ok());
    const grammar::Grammar g = grammar::Grammar::compile(grammar::constraint_rules(c));
    std::string good, other, bad_args;
    switch (f) {
      case ToolFormat::kHermes:
        good = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\":\"Paris\",\"unit\":\"c\"}}\n</tool_call>";
        other = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\":\"UTC\"}}\n</tool_call>";
        bad_args = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\":\"c\"}}\n</tool_call>";
        break;
      case ToolFormat::kLlama3:
        good = "{\"name\": \"get_weather\", \"parameters\": {\"location\":\"Paris\"}}";
        other = "{\"name\": \"get_time\", \"parameters\": {\"tz\":\"UTC\"}}";
        bad_args = "{\"name\": \"get_weather\", \"parameters\": {\"location\":1}}";
        break;
      case ToolFormat::kGeneric:
        good = "{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": {\"location\":\"Paris\"}}}";
        other = "{\"tool_call\": {\"name\": \"get_time\", \"arguments\": {\"tz\":\"UTC\"}}}";
        bad_args = "{\"tool_call\": {\"name\": \"get_weather\", \"arguments\": {\"place\":\"Paris\"}}}";
        break;
      case ToolFormat::kMistral:
        good = "[TOOL_CALLS]get_weather[ARGS]{\"location\":\"Paris\",\"unit\":\"c\"}";
        other = "[TOOL_CALLS]get_time[ARGS]{\"tz\":\"UTC\"}";
        bad_args = "[TOOL_CALLS]get_weather[ARGS]{\"unit\":\"c\"}";
        break;
      case ToolFormat::kHarmony:
        good = "<|channel|>analysis<|message|>The user wants weather.<|end|><|start|>assistant"
               "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\"}";
        other = "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{\"tz\":\"UTC\"}";
        bad_args = "<|channel|>commentary to=functions.get_time <|constrain|>json<|message|>{\"tz\":1}";
        break;
      case ToolFormat::kDeepSeek:
        good = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"location\":\"Paris\"}"
               "<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        other = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{\"tz\":\"UTC\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        bad_args = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_times<｜tool▁sep｜>{\"tz\":\"UTC\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
        break;
      default:
        good = "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>";
        other = "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>";
        bad_args = "<tool_call>\n<function=get_date>\n</function>\n</tool_call>";  // not declared
        break;
    }
    EXPECT_TRUE(grammar_matches(g, good));
    EXPECT_TRUE(grammar_matches(g, other));
    EXPECT_FALSE(grammar_matches(g, bad_args));
    EXPECT_FALSE(grammar_matches(g, "Sure! " + good));
    AnswerFormat a;
    a.tools = f;
    a.parse_tools = true;
    a.declared = t.tools;
    const ParsedAnswer p = parse_answer(good, a);
    ASSERT_EQ(p.calls.size(), 1u);
    EXPECT_EQ(p.calls[0].name, "get_weather");
    if (f == ToolFormat::kHermes || f == ToolFormat::kQwenXml || f == ToolFormat::kMistral) {
      const std::string two = good + (f == ToolFormat::kMistral ? "" : "\n") + other;
      EXPECT_TRUE(grammar_matches(g, two));  // parallel calls
      EXPECT_EQ(parse_answer(two, a).calls.size(), 2u);
    }
    // Named: that tool only; parallel off: one call.
    ToolRequest named;
    ASSERT_TRUE(fields(std::string("{") + kTools +
                           R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}}, "parallel_tool_calls": false})",
                       &named)
                    .ok());
    ASSERT_TRUE(tool_choice_constraint(named, f, &c).ok());
    const grammar::Grammar n = grammar::Grammar::compile(grammar::constraint_rules(c));
    EXPECT_FALSE(grammar_matches(n, good));
    EXPECT_TRUE(grammar_matches(n, other));
    EXPECT_FALSE(grammar_matches(n, other + "\n" + other));
    EXPECT_FALSE(grammar_matches(n, other + other));
  }
  // "auto" in a format with a text marker: free text, or text and then valid calls.
  for (ToolFormat f : {ToolFormat::kHermes, ToolFormat::kQwenXml}) {
    ToolRequest t;
    ASSERT_TRUE(fields(std::string("{") + kTools + "}", &t).ok());
    OutputConstraint c;
    ASSERT_TRUE(tool_choice_constraint(t, f, &c).ok());
    ASSERT_TRUE(c.active());
    const grammar::Grammar g = grammar::Grammar::compile(grammar::constraint_rules(c));
    const std::string call = f == ToolFormat::kHermes
                                 ? "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\":\"UTC\"}}\n</tool_call>"
                                 : "<tool_call>\n<function=get_time>\n<parameter=tz>\nUTC\n</parameter>\n</function>\n</tool_call>";
    EXPECT_TRUE(grammar_matches(g, "It is sunny. <tool_ca ll> is no call."));
    EXPECT_TRUE(grammar_matches(g, ""));
    EXPECT_TRUE(grammar_matches(g, "Let me check.\n" + call));
    EXPECT_FALSE(grammar_matches(g, "Let me check.\n<tool_call>\n{\"name\": \"nope\"}"));
    EXPECT_FALSE(grammar_matches(g, "Let me check.\n<tool_call> whatever </tool_call>"));
  }
}

}  // namespace
}  // namespace kvserve
