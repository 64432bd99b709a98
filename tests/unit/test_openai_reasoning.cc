// The chat answer's JSON as OpenAI's clients read it, with a thinking template: the reasoning in
// message.reasoning_content and delta.reasoning_content, the rest in content, whole and streamed
// alike, for every <think> case of llama.cpp's expected parses (tool-call-parses.json).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "answer_helpers.h"
#include "gguf/gguf.h"
#include "http/openai_api.h"
#include "test_support.h"

namespace kvserve {
namespace {

using testing::trimmed;

TEST(OpenAIReasoning, MessageAndDeltasCarryReasoningContent) {
  const std::string cases = std::string(KVSERVE_SHARED_DIR) + "/chat-templates/tool-call-parses.json";
  KVSERVE_REQUIRE_SHARED_FILE(cases);
  KVSERVE_REQUIRE_SHARED_FILE(testing::shared_model("stories260K.gguf"));
  GgufFile file(testing::shared_model("stories260K.gguf"));
  Tokenizer tok(file);
  const nlohmann::json all = nlohmann::json::parse(testing::read_text(cases));
  int checked = 0;
  for (const char* group : {"think-qwq", "think-hermes", "deepseek-r1", "qwen3.5"}) {
    for (const nlohmann::json& c : all["groups"][group]["cases"]) {
      if (!c["expect"]["tool_calls"].empty()) continue;
      const std::string output = c["output"];
      bool inside = c["params"].value("thinking_forced_open", false);
      if (c["generation_prompt"].is_string()) inside = prompt_opens_reasoning(c["generation_prompt"].get<std::string>());
      AnswerFormat f;
      f.reasoning = {"<think>", "</think>"};
      f.reasoning_open = inside;
      CompletionWriter whole("chatcmpl-x", "m", 0, tok, -1, true, f);
      CompletionWriter streamed("chatcmpl-x", "m", 0, tok, -1, true, f);
      std::string sse;
      for (size_t i = 0; i < output.size(); i += 3) {
        Event e;
        e.text = output.substr(i, 3);
        whole.add(e);
        sse += streamed.stream_event(e, false);
      }
      Event last;
      last.completion = Completion{};
      last.completion->reason = FinishReason::kStop;
      whole.add(last);
      sse += streamed.stream_event(last, false);
      const nlohmann::json body = whole.body();
      const nlohmann::json& msg = body["choices"][0]["message"];
      EXPECT_EQ(msg["content"], trimmed(c["expect"]["content"])) << c["id"];
      EXPECT_EQ(msg.value("reasoning_content", ""), trimmed(c["expect"].value("reasoning_content", ""))) << c["id"];
      std::string content, reasoning;
      for (const nlohmann::json& chunk : testing::sse_chunks(sse)) {
        const nlohmann::json& delta = chunk["choices"][0]["delta"];
        content += delta.value("content", "");
        reasoning += delta.value("reasoning_content", "");
      }
      EXPECT_EQ(trimmed(content), msg["content"]) << c["id"];
      EXPECT_EQ(trimmed(reasoning), msg.value("reasoning_content", "")) << c["id"];
      ++checked;
    }
  }
  EXPECT_GE(checked, 5);
}

}  // namespace
}  // namespace kvserve
