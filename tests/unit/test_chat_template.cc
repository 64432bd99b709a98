// The chat-template interpreter against Python's Jinja2 (../shared/chat-templates/expected.json:
// eight real templates, three conversations each, rendered as transformers renders them), and
// the constructs those templates use, one by one, on inputs of our own.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "test_support.h"
#include "gguf/gguf.h"
#include "text/answer_parser.h"
#include "text/chat_template.h"
#include "text/jinja/jinja.h"
#include "text/tokenizer.h"

namespace kvserve {
namespace {

using nlohmann::json;
using jinja::JinjaError;
using jinja::Template;
using jinja::Value;

std::string shared_template(const std::string& name) {
  return std::string(KVSERVE_SHARED_DIR) + "/chat-templates/" + name;
}

json load_json(const std::string& path) {
  std::ifstream in(path);
  return in ? json::parse(in) : json();
}

constexpr std::time_t kFixedNow = 1727222400;  // 2024-09-25 00:00:00 UTC, as expected.json was made

json conversation(const std::string& which) {
  if (which == "a")
    return json::array({{{"role", "system"}, {"content", "You are a helpful assistant."}},
                        {{"role", "user"}, {"content", "Hello!"}}});
  return json::array({{{"role", "user"}, {"content", "What is 2+2?"}},
                      {{"role", "assistant"}, {"content", "4"}},
                      {{"role", "user"}, {"content", "And 3+3?"}}});
}

// ctx gains the template's bos_token and eos_token where sources.json records them.
template <typename Json>
void add_source_tokens(Json& ctx, const json& src_info) {
  for (const char* k : {"bos_token", "eos_token"})
    if (src_info.contains(k) && !src_info[k].is_null()) ctx[k] = src_info[k];
}

// The template's token `key` as sources.json records it, or "".
std::string source_token(const json& src_info, const char* key) {
  return src_info.contains(key) && src_info[key].is_string() ? src_info[key].get<std::string>() : "";
}

std::string render(const std::string& source, const json& messages, bool add_generation_prompt, const json& src_info) {
  json ctx = {{"messages", messages}, {"add_generation_prompt", add_generation_prompt}, {"tools", nullptr},
              {"documents", nullptr}};
  add_source_tokens(ctx, src_info);
  return Template(source).render(Value::from_json(ctx), kFixedNow);
}

TEST(ChatTemplate, RealTemplatesRenderAsJinja2Does) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_template("expected.json"));
  const json expected = load_json(shared_template("expected.json"));
  const json sources = load_json(shared_template("sources.json"));
  int checked = 0;
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    const std::string name = it.key();
    const std::string source = testing::read_text(shared_template(name));
    for (const char* conv : {"a", "b", "c"}) {
      const json& want = it.value()[conv];
      SCOPED_TRACE(name + " conversation " + conv);
      const bool gen = std::string(conv) != "c";
      if (want.is_object() && want.contains("error")) {
        try {
          render(source, conversation(conv), gen, sources[name]);
          ADD_FAILURE() << "rendered; Jinja2 raised " << want["error"];
        } catch (const JinjaError& e) {
          EXPECT_NE(std::string(e.what()).find(want["error"].get<std::string>()), std::string::npos) << e.what();
        }
      } else {
        EXPECT_EQ(render(source, conversation(conv), gen, sources[name]), want.get<std::string>());
      }
      ++checked;
    }
  }
  EXPECT_GE(expected.size(), 17u);  // every template in shared/, the 2025-26 ones with macros included
  EXPECT_EQ(checked, 3 * static_cast<int>(expected.size()));
}

std::string r(const std::string& src, const json& ctx = json::object()) {
  return Template(src).render(Value::from_json(ctx), kFixedNow);
}

// The turn adapted as conversations.json's variants[template][conversation] says (content null or
// "", arguments as the JSON string or parsed), as llama.cpp and vLLM adapt it per template.
using ordered = nlohmann::ordered_json;

ordered load_ordered(const std::string& path) {
  std::ifstream in(path);
  return in ? ordered::parse(in) : ordered();
}

ordered adapted(ordered messages, const ordered& variant) {
  if (variant.is_null()) return messages;
  for (ordered& m : messages) {
    if (!m.contains("tool_calls")) continue;
    if (variant.value("content", "null") == "empty" && m["content"].is_null()) m["content"] = "";
    if (variant.value("arguments", "string") == "object")
      for (ordered& c : m["tool_calls"])
        c["function"]["arguments"] = ordered::parse(c["function"]["arguments"].get<std::string>());
  }
  return messages;
}

// Conversations d-g (tools, tool calls and their results, reasoning_content) as
// conversations.json gives them, rendered with the tools in the context as transformers does.
TEST(ChatTemplate, ToolAndReasoningConversationsRenderAsJinja2Does) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_template("conversations.json"));
  const json expected = load_json(shared_template("expected.json"));
  const json sources = load_json(shared_template("sources.json"));
  const ordered convs = load_ordered(shared_template("conversations.json"));
  int checked = 0;
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    const std::string name = it.key();
    const std::string source = testing::read_text(shared_template(name));
    for (const char* conv : {"d", "e", "f", "g"}) {
      const json& want = it.value()[conv];
      const ordered& c = convs["conversations"][conv];
      SCOPED_TRACE(name + " conversation " + conv);
      const ordered variant = convs["variants"].contains(name) && convs["variants"][name].contains(conv)
                                  ? convs["variants"][name][conv]
                                  : ordered();
      ordered ctx = {{"messages", adapted(c["messages"], variant)},
                     {"add_generation_prompt", c.value("add_generation_prompt", true)},
                     {"tools", c.contains("tools") ? c["tools"] : ordered()},
                     {"documents", nullptr}};
      add_source_tokens(ctx, sources[name]);
      if (want.is_object() && want.contains("error")) {
        try {
          Template(source).render(Value::from_json(ctx), kFixedNow);
          ADD_FAILURE() << "rendered; Jinja2 raised " << want["error"];
        } catch (const JinjaError& e) {
          // Python's own exceptions are worded by Python; raise_exception's message is the template's.
          if (!want.contains("python_exception")) {
            EXPECT_NE(std::string(e.what()).find(want["error"].get<std::string>()), std::string::npos) << e.what();
          }
        }
      } else {
        try {
          EXPECT_EQ(Template(source).render(Value::from_json(ctx), kFixedNow), want.get<std::string>());
        } catch (const JinjaError& e) {
          ADD_FAILURE() << e.what();
        }
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4 * static_cast<int>(expected.size()));
}

// The server's own path: every conversation a-g exactly as conversations.json holds it (as an
// OpenAI client sends it: content null, arguments strings), through ChatTemplate, which probed
// each template at load for the tool-call turn it wants; the render equals Jinja2's, or the
// template refuses where Jinja2's did.
TEST(ChatTemplate, ConversationsAsSentRenderAsJinja2DoesThroughTheProbedForm) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_template("conversations.json"));
  const json expected = load_json(shared_template("expected.json"));
  const json sources = load_json(shared_template("sources.json"));
  const ordered convs = load_ordered(shared_template("conversations.json"));
  int checked = 0;
  for (auto it = expected.begin(); it != expected.end(); ++it) {
    const std::string name = it.key();
    const json& src = sources[name];
    const ChatTemplate t(testing::read_text(shared_template(name)), source_token(src, "bos_token"),
                         source_token(src, "eos_token"), name);
    for (auto c = convs["conversations"].begin(); c != convs["conversations"].end(); ++c) {
      const json& want = it.value()[c.key()];
      SCOPED_TRACE(name + " conversation " + c.key());
      ChatTurns turns;
      turns.messages = c.value()["messages"];
      turns.tools = c.value().contains("tools") ? c.value()["tools"] : ordered();
      turns.add_generation_prompt = c.value().value("add_generation_prompt", true);
      turns.now = kFixedNow;
      if (want.is_object() && want.contains("error")) {
        EXPECT_THROW(t.render(turns), JinjaError);
      } else {
        try {
          EXPECT_EQ(t.render(turns), want.get<std::string>());
        } catch (const JinjaError& e) {
          ADD_FAILURE() << e.what();
        }
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, 7 * static_cast<int>(expected.size()));
}

// The probe finds the form conversations.json records where only one form works.
TEST(ChatTemplate, ProbeFindsTheToolCallTurnForm) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_template("conversations.json"));
  const ordered convs = load_ordered(shared_template("conversations.json"));
  int checked = 0;
  for (auto it = convs["variants"].begin(); it != convs["variants"].end(); ++it) {
    const ChatTemplate t(testing::read_text(shared_template(it.key())), "<s>", "</s>", it.key());
    const ordered& v = it.value()["e"];
    const std::string content = v.value("content", "either"), arguments = v.value("arguments", "either");
    if (content != "either") {
      EXPECT_EQ(t.tool_call_turn_form().content_empty, content == "empty") << it.key();
    }
    if (arguments != "either") {
      EXPECT_EQ(t.tool_call_turn_form().arguments_object, arguments == "object") << it.key();
    }
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

// The default ChatML: the same text as before for conversations without tools; with tools,
// their schemas in the system turn, the calls of an assistant turn (content null) in
// <tool_call> tags that the Hermes parser reads back as the same calls, and results in
// <tool_response> tags.
TEST(ChatTemplate, DefaultChatMlRendersToolsCallsAndResults) {
  const ChatTemplate t("", "", "", "ChatML");
  EXPECT_EQ(t.tool_format(), ToolFormat::kHermes);
  EXPECT_EQ(t.render(conversation("a"), true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n"
            "<|im_start|>assistant\n");
  KVSERVE_REQUIRE_SHARED_FILE(shared_template("conversations.json"));
  const ordered convs = load_ordered(shared_template("conversations.json"));
  const ordered& g = convs["conversations"]["g"];
  ChatTurns turns;
  turns.messages = g["messages"];
  turns.tools = g["tools"];
  const std::string out = t.render(turns);
  EXPECT_EQ(out.rfind("<|im_start|>system\nYou are a helpful assistant.\n\n", 0), 0u) << out;
  const size_t tools = out.find("<tools>\n"), tools_end = out.find("\n</tools>");
  ASSERT_NE(tools_end, std::string::npos) << out;
  std::stringstream schemas(out.substr(tools + 8, tools_end - tools - 8));
  std::string line;
  for (size_t i = 0; std::getline(schemas, line); ++i) EXPECT_EQ(ordered::parse(line), g["tools"][i]["function"]);
  EXPECT_NE(out.find("<tool_response>\n{\"time\": \"14:05\"}\n</tool_response>"), std::string::npos) << out;
  const size_t a = out.find("<|im_start|>assistant\n"), e = out.find("<|im_end|>", a);
  AnswerFormat f;
  f.tools = ToolFormat::kHermes;
  f.parse_tools = true;
  const ParsedAnswer p = parse_answer(out.substr(a + 22, e - a - 22), f);
  ASSERT_EQ(p.calls.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ordered& call = g["messages"][2]["tool_calls"][i]["function"];
    EXPECT_EQ(p.calls[i].name, call["name"].get<std::string>());
    EXPECT_EQ(ordered::parse(p.calls[i].arguments), ordered::parse(call["arguments"].get<std::string>()));
  }
  EXPECT_EQ(p.content, "");
}

// Template kwargs (the chat API's chat_template_kwargs) reach the template: Qwen3's
// enable_thinking false closes an empty <think> block after the generation prompt (the
// template's last lines), and the render otherwise is Jinja2's; they cannot replace the
// conversation.
TEST(ChatTemplate, KwargsReachTheTemplateButNotTheConversation) {
  const std::string model = testing::shared_model("stories260K.gguf");
  KVSERVE_REQUIRE_SHARED_FILE(model);
  KVSERVE_REQUIRE_SHARED_FILE(shared_template("qwen3.jinja"));
  GgufFile f(model);
  Tokenizer tok(f);
  const ChatTemplate t(f, tok, shared_template("qwen3.jinja"));
  const std::string plain = load_json(shared_template("expected.json"))["qwen3.jinja"]["b"].get<std::string>();
  EXPECT_EQ(t.render(conversation("b"), true), plain);
  EXPECT_EQ(t.render(conversation("b"), true, {{"enable_thinking", true}}), plain);
  EXPECT_EQ(t.render(conversation("b"), true, {{"enable_thinking", false}}), plain + "<think>\n\n</think>\n\n");
  EXPECT_EQ(t.render(conversation("b"), true, {{"messages", json::array()}, {"add_generation_prompt", false}}), plain);
}

// Constructs one at a time, each with what Jinja2 gives for it.
TEST(ChatTemplate, Constructs) {
  EXPECT_EQ(r("{{ 'a' ~ 1 ~ none }}"), "a1None");
  EXPECT_EQ(r("{% for x in [1, 2, 3] %}{{ loop.index0 }}{{ x }}{% if not loop.last %},{% endif %}{% endfor %}"), "01,12,23");
  EXPECT_EQ(r("{% for k, v in d.items() if k != 'b' %}{{ k }}={{ v }};{% endfor %}", {{"d", {{"a", 1}, {"b", 2}, {"c", 3}}}}),
            "a=1;c=3;");
  EXPECT_EQ(r("{% set ns = namespace(n=0) %}{% for x in [1,2,3] %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}"), "6");
  EXPECT_EQ(r("{% set n = 1 %}{% for x in [1] %}{% set n = 5 %}{% endfor %}{{ n }}"), "1");  // loops scope set
  EXPECT_EQ(r("{% if true %}{% set n = 7 %}{% endif %}{{ n }}"), "7");                       // if does not
  EXPECT_EQ(r("{{ s[1:] }}|{{ s[:-1] }}|{{ s[-1] }}|{{ s[::-1] }}", {{"s", "abcd"}}), "bcd|abc|d|dcba");
  EXPECT_EQ(r("{{ l[1:] | length }}", {{"l", {1, 2, 3}}}), "2");
  EXPECT_EQ(r("{{ 'b' in 'abc' }}{{ 2 in [1,2] }}{{ 'k' in d }}{{ 'z' not in d }}", {{"d", {{"k", 1}}}}), "TrueTrueTrueTrue");
  EXPECT_EQ(r("{{ x is defined }}{{ y is defined }}{{ not y is defined }}{{ x is not none }}", {{"x", 1}}), "TrueFalseTrueTrue");
  // Strings index, slice and count by character as Python's do (Jinja2's output).
  EXPECT_EQ(r("{{ s[:1] }}|{{ s[1] }}|{{ s[-1] }}|{{ s | length }}|{{ s[::-1] }}", {{"s", "éa東"}}), "é|a|東|3|東aé");
  EXPECT_EQ(r("{{ m.tool_calls is defined }}{{ 'yes' if m.tool_calls else 'no' }}", {{"m", {{"role", "user"}}}}), "Falseno");
  EXPECT_EQ(r("{{ '  hi  ' | trim }}|{{ ' a b '.strip() }}|{{ 'a</think>b'.split('</think>')[-1] }}"), "hi|a b|b");
  EXPECT_EQ(r("{{ 'abc'.startswith('ab') }}{{ x | string }}{{ [1] | list | length }}", {{"x", 5}}), "True51");
  EXPECT_EQ(r("{{ ms | selectattr('role', 'equalto', 'user') | list | length }}",
              {{"ms", {{{"role", "user"}}, {{"role", "bot"}}, {{"role", "user"}}}}}),
            "2");
  EXPECT_EQ(r("{{ d | tojson }}", {{"d", {{"a", {1, "é\n"}}, {"b", nullptr}}}}), "{\"a\": [1, \"é\\n\"], \"b\": null}");
  EXPECT_EQ(r("{{ d | tojson(indent=2) }}", {{"d", {{"a", {1, 2}}}}}), "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
  // What the fuzzer found: an indent of 2.4e14 spaces per level is refused, not allocated.
  EXPECT_THROW(r("{{ d | tojson(indent=244444444444444) }}", {{"d", {{"a", {1, 2}}}}}), JinjaError);
  EXPECT_EQ(r("{{ x is string }}{{ d is mapping }}{{ l is iterable }}{{ 3 is odd }}", {{"x", "s"}, {"d", json::object()}, {"l", json::array()}}),
            "TrueTrueTrueTrue");
  EXPECT_EQ(r("{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
            "13");
  EXPECT_EQ(r("{{ strftime_now('%d %b %Y') }}"), "25 Sep 2024");
  EXPECT_EQ(r("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 1 / 2 }} {{ 2 ** 3 }} {{ 1.5 + 1 }}"), "3 -4 1 0.5 8 2.5");
  EXPECT_EQ(r("{{ a or 'd' }}{{ '' or 'e' }}{{ 'x' and 'y' }}", {{"a", ""}}), "dey");
  // Whitespace control: trim_blocks, lstrip_blocks and '-'.
  EXPECT_EQ(r("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(r("a  {%- if true -%}  b  {%- endif %}"), "ab");
  EXPECT_EQ(r("{# note #}\nx{{ 1 }}\n"), "x1");  // a comment's newline, and the template's last one
  EXPECT_EQ(r("{{ '}}' }}"), "}}");
  // Macros (Jinja2's output for each): defaults, keywords, recursion, their own scope (a set
  // inside stays inside; top-level names are seen), a missing argument is undefined, and a
  // macro's text goes through filters.
  EXPECT_EQ(r("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
              "{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }}"),
            "Hi a! Hi b? Hi c.");
  EXPECT_EQ(r("{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(3) }}"), "321");
  EXPECT_EQ(r("{% set g = 'G' %}{% macro m(x) %}{{ g }}{{ x }}{% set g = 'L' %}{{ g }}{% endmacro %}{{ m(1) }}{{ g }}"),
            "G1LG");
  EXPECT_EQ(r("{% macro m(x) %}[{{ x }}]{% endmacro %}{% for i in [1,2] %}{{ m(i) }}{% endfor %}{{ m() }}"), "[1][2][]");
  EXPECT_EQ(r("{% macro m(x) %}{{ x | length }}{% endmacro %}{{ m([1,2,3]) | int + 1 }}"), "4");
}

// What a template file can do to the renderer ends in an error, never a crash: endless macro
// recursion, and iterating what cannot be iterated (with Python's words, as Jinja2 raises).
TEST(ChatTemplate, HostileTemplatesEndInErrors) {
  EXPECT_THROW(r("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}"), JinjaError);
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  // Nesting a template file can hold, each deep enough to have ended the process at parse or render.
  for (const std::string& bad :
       {"{{ " + repeat("(", 100000) + "1" + repeat(")", 100000) + " }}", repeat("{% if true %}", 20000) + "x" + repeat("{% endif %}", 20000),
        "{{ " + repeat("[", 50000) + repeat("]", 50000) + " }}", "{{ " + repeat("not ", 100000) + "x }}",
        "{{ " + repeat("- ", 100000) + "1 }}", "{{ 'a'" + repeat(" ~ 'a'", 100000) + " }}",
        "{{ x" + repeat(" | trim", 100000) + " }}", "{{ x" + repeat(".y", 100000) + " }}"}) {
    EXPECT_THROW(r(bad, {{"x", "s"}}), JinjaError) << bad.substr(0, 40);
  }
  // Values may not grow without bound: a string doubled, a replace that multiplies.
  EXPECT_THROW(r("{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
               JinjaError);
  EXPECT_THROW(r("{% set s = 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa' %}"
                 "{{ s.replace('a', s).replace('a', s).replace('a', s).replace('a', s).replace('a', s) | length }}"),
               JinjaError);
  // Real templates' depth is far inside the bounds.
  EXPECT_EQ(r("{{ " + repeat("(", 30) + "1" + repeat(")", 30) + " }}"), "1");
  EXPECT_EQ(r("{{ ('a'" + repeat(" ~ 'a'", 60) + ") | length }}"), "61");
  try {
    r("{% for x in none %}{% endfor %}");
    ADD_FAILURE() << "iterated None";
  } catch (const JinjaError& e) {
    EXPECT_NE(std::string(e.what()).find("'NoneType' object is not iterable"), std::string::npos) << e.what();
  }
}

TEST(ChatTemplate, ErrorsAreErrors) {
  for (const char* bad : {"{% if x %}", "{{ 1 + }}", "{% call m() %}{% endcall %}", "{{ 'open }}", "{% for %}",
                          "{% macro m( %}{% endmacro %}", "{% macro m() %}"})
    EXPECT_THROW(Template{bad}, JinjaError) << bad;
  EXPECT_THROW(r("{{ raise_exception('no system role') }}"), JinjaError);
  try {
    r("{{ raise_exception('Conversation roles must alternate') }}");
  } catch (const JinjaError& e) {
    EXPECT_STREQ(e.what(), "Conversation roles must alternate");
  }
  EXPECT_THROW(r("{{ x.y }}"), JinjaError);       // an attribute of an undefined value
  EXPECT_THROW(r("{{ [1][5] }}"), JinjaError);
  EXPECT_THROW(r("{{ 1 + 'a' }}"), JinjaError);
  EXPECT_THROW(r("{{ x | nosuchfilter }}"), JinjaError);
}

}  // namespace
}  // namespace kvserve
