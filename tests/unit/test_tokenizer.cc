// Tokenizers against llama.cpp's published test vectors (Hugging Face tokenizer outputs),
// plus invariants: decode(encode(x)) == x and streaming never splits a UTF-8 character.
#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "test_support.h"
#include "text/pre_tokenizer.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

namespace kvserve {
namespace {

using testing::read_text;
using testing::shared_model;

struct Case {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Case> load_cases(const std::string& vocab) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::string inp = read_text(shared_model(vocab + ".inp"));
  std::string out = read_text(shared_model(vocab + ".out"));
  std::vector<std::string> texts;
  for (size_t pos = 0;;) {
    size_t next = inp.find(sep, pos);
    if (next == std::string::npos) break;
    texts.push_back(inp.substr(pos, next - pos));
    pos = next + sep.size();
  }
  std::vector<Case> cases;
  std::istringstream lines(out);
  std::string line;
  for (const auto& t : texts) {
    std::getline(lines, line);
    Case c{t, {}};
    std::istringstream ids(line);
    int32_t id;
    while (ids >> id) c.ids.push_back(id);
    cases.push_back(std::move(c));
  }
  return cases;
}

class VocabTest : public ::testing::TestWithParam<const char*> {};

TEST_P(VocabTest, MatchesReferenceVectors) {
  const std::string vocab = GetParam();
  KVSERVE_REQUIRE_SHARED_FILE(shared_model(vocab));
  GgufFile file(shared_model(vocab));
  Tokenizer tok(file);
  auto cases = load_cases(vocab);
  ASSERT_EQ(cases.size(), 46u);
  for (const auto& c : cases) {
    EXPECT_EQ(tok.encode(c.text, false), c.ids) << "text: '" << c.text << "'";
  }
}

TEST_P(VocabTest, DecodeInvertsEncodeAndStreamsWholeCharacters) {
  const std::string vocab = GetParam();
  KVSERVE_REQUIRE_SHARED_FILE(shared_model(vocab));
  GgufFile file(shared_model(vocab));
  Tokenizer tok(file);
  std::vector<std::string> texts;
  for (const auto& c : load_cases(vocab)) texts.push_back(c.text);
  texts.push_back("Zürich 東京 🦙 naïve café — ½");
  for (const auto& text : texts) {
    auto ids = tok.encode(text, true);
    EXPECT_EQ(tok.decode(ids), text);
    IncrementalDecoder dec(tok, {});
    std::string streamed;
    for (int32_t id : ids) {
      std::string chunk = dec.push(id);
      EXPECT_TRUE(utf8_is_valid(chunk)) << "chunk splits a character in '" << text << "'";
      streamed += chunk;
    }
    streamed += dec.flush();
    EXPECT_EQ(streamed, text);
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabTest,
                         ::testing::Values("ggml-vocab-llama-spm.gguf", "ggml-vocab-gpt-2.gguf",
                                           "vocab/ggml-vocab-deepseek-coder.gguf", "vocab/ggml-vocab-deepseek-llm.gguf",
                                           "vocab/ggml-vocab-falcon.gguf", "vocab/ggml-vocab-mpt.gguf",
                                           "vocab/ggml-vocab-refact.gguf", "vocab/ggml-vocab-starcoder.gguf",
                                           "vocab/ggml-vocab-phi-3.gguf"),
                         [](const auto& info) {
                           // "vocab/ggml-vocab-deepseek-coder.gguf" -> "deepseek_coder"
                           std::string n = info.param;
                           n = n.substr(n.rfind("ggml-vocab-") + 11);
                           n = n.substr(0, n.find(".gguf"));
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

TEST(Tokenizer, SpmKnownStrings) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("ggml-vocab-llama-spm.gguf"));
  GgufFile file(shared_model("ggml-vocab-llama-spm.gguf"));
  Tokenizer tok(file);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_TRUE(tok.adds_bos());
  EXPECT_EQ(tok.encode("Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(tok.encode("", true), (std::vector<int32_t>{1}));
}

TEST(Tokenizer, IncrementalDecoderKeepsSpaceAfterPrompt) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("ggml-vocab-llama-spm.gguf"));
  GgufFile file(shared_model("ggml-vocab-llama-spm.gguf"));
  Tokenizer tok(file);
  auto prompt = tok.encode("Hello", true);
  IncrementalDecoder after_prompt(tok, prompt);
  IncrementalDecoder at_start(tok, {tok.bos_id()});
  std::string a, b;
  for (int32_t id : tok.encode("world", false)) {
    a += after_prompt.push(id);
    b += at_start.push(id);
  }
  EXPECT_EQ(a, " world");
  EXPECT_EQ(b, "world");
}

TEST(Utf8, TakesCompleteCharactersOnly) {
  std::string pending = "a\xE2\x82";  // "a" then 2 of the 3 bytes of "€"
  EXPECT_EQ(utf8_take_complete(pending, false), "a");
  EXPECT_EQ(pending, "\xE2\x82");
  pending += "\xAC";
  EXPECT_EQ(utf8_take_complete(pending, false), "\xE2\x82\xAC");
  pending = "\xFF" "b";
  EXPECT_EQ(utf8_take_complete(pending, false), "\xEF\xBF\xBD" "b");
  pending = "\xE2\x82";
  EXPECT_EQ(utf8_take_complete(pending, true), "\xEF\xBF\xBD");
  EXPECT_FALSE(utf8_is_valid("\xED\xA0\x80"));  // a surrogate
  EXPECT_FALSE(utf8_is_valid("\xC0\x80"));      // overlong
  EXPECT_TRUE(utf8_is_valid("\xF0\x9F\xA6\x99"));
}

}  // namespace
}  // namespace kvserve

namespace kvserve {
namespace {

int32_t id_of(const Tokenizer& tok, const std::string& text) {
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (tok.token_text(id) == text) return id;
  return -1;
}

// Phi-3's chat markers are control tokens: prompt text spelling them becomes them (as
// llama.cpp's server and vLLM read prompts), unless special parsing is off; <|end|> ends a
// generation as EOS does, <|user|> does not.
TEST(Tokenizer, ControlTokensInTextAndTheEndOfGenerationSet) {
  KVSERVE_REQUIRE_SHARED_FILE(shared_model("vocab/ggml-vocab-phi-3.gguf"));
  GgufFile file(shared_model("vocab/ggml-vocab-phi-3.gguf"));
  Tokenizer tok(file);
  const int32_t user = id_of(tok, "<|user|>"), end = id_of(tok, "<|end|>");
  ASSERT_GE(user, 0);
  ASSERT_GE(end, 0);
  const std::vector<int32_t> with = tok.encode("<|user|>\nHi there<|end|>", false, true);
  ASSERT_GE(with.size(), 3u);
  EXPECT_EQ(with.front(), user);
  EXPECT_EQ(with.back(), end);
  // Between them, the text as it tokenizes alone after a special token (with SentencePiece's
  // dummy prefix, as llama.cpp adds it there).
  const std::vector<int32_t> middle = tok.encode("\nHi there", false, true);
  EXPECT_EQ(std::vector<int32_t>(with.begin() + 1, with.end() - 1), middle);
  const std::vector<int32_t> without = tok.encode("<|user|>\nHi there<|end|>", false, false);
  EXPECT_EQ(std::count(without.begin(), without.end(), user), 0);
  EXPECT_EQ(std::count(without.begin(), without.end(), end), 0);
  EXPECT_EQ(tok.decode(without), "<|user|>\nHi there<|end|>");

  EXPECT_TRUE(tok.is_end_of_generation(tok.eos_id()));
  EXPECT_TRUE(tok.is_end_of_generation(end));
  EXPECT_FALSE(tok.is_end_of_generation(user));
  EXPECT_FALSE(tok.is_end_of_generation(id_of(tok, "Hi")));
}

TEST(PreTokenizer, UnknownNameIsRefusedNamingItAndTheKnownOnes) {
  try {
    PreTokenizer p("tekken-9");
    FAIL() << "accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'tekken-9'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("llama-bpe"), std::string::npos) << e.what();
  }
  EXPECT_EQ(PreTokenizer("").name(), "default");  // no tokenizer.ggml.pre: llama.cpp's default
  for (const char* n : {"default", "gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "deepseek-coder", "falcon", "mpt",
                        "starcoder", "refact", "gpt-neox", "olmo", "smollm"})
    EXPECT_NO_THROW(PreTokenizer{n}) << n;
}

}  // namespace
}  // namespace kvserve
