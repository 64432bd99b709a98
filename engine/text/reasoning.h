// A chat answer's reasoning block (<think>...</think>, as Qwen3, QwQ and DeepSeek-R1 write it)
// apart from its content, as it streams: what comes back as reasoning_content (vLLM's and
// llama.cpp's field) and content. The block is open from the start when the prompt opened it
// (the generation prompt ends with <think>); otherwise it may open at the start of the answer.
#pragma once

#include <string>
#include <string_view>

namespace kvserve {

inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";

// Whether the prompt leaves a reasoning block open: its last <think> after its last </think>.
bool prompt_opens_reasoning(std::string_view prompt, std::string_view open = kThinkOpen,
                            std::string_view close = kThinkClose);

class ReasoningSplitter {
 public:
  // inside: the prompt opened the block, so the answer starts in it.
  // open/close: the block's markers (Mistral's are [THINK] and [/THINK]).
  explicit ReasoningSplitter(bool inside, std::string_view open = kThinkOpen, std::string_view close = kThinkClose)
      : state_(inside ? State::kInside : State::kStart), open_(open), close_(close) {}

  struct Piece {
    std::string reasoning, content;
  };
  // More of the answer; returns what is settled (bytes that may start a marker wait).
  Piece push(std::string_view text);
  // The end of the answer: what was held back.
  Piece finish();

 private:
  enum class State { kStart, kInside, kContent };
  void run(Piece& out, bool final);

  State state_;
  std::string open_, close_;
  bool reasoning_started_ = false;  // leading whitespace of the reasoning is dropped
  bool content_started_ = false;    // and of the content after the block
  std::string held_;
};

// The whole answer split at once; both parts without surrounding whitespace.
ReasoningSplitter::Piece split_reasoning(std::string_view answer, bool inside, std::string_view open = kThinkOpen,
                                         std::string_view close = kThinkClose);

}  // namespace kvserve
