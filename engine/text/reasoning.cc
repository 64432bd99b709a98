#include "text/reasoning.h"

#include <algorithm>

namespace kvserve {
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The longest suffix of s that is a proper prefix of marker (it may be the marker's start).
size_t partial_marker(std::string_view s, std::string_view marker) {
  for (size_t n = std::min(s.size(), marker.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == marker.substr(0, n)) return n;
  return 0;
}

// Drops s's leading whitespace; whether anything is left.
bool drop_leading_space(std::string& s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  s.erase(0, i);
  return !s.empty();
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

bool prompt_opens_reasoning(std::string_view prompt, std::string_view open_marker, std::string_view close_marker) {
  const size_t open = prompt.rfind(open_marker);
  if (open == std::string_view::npos) return false;
  const size_t close = prompt.rfind(close_marker);
  return close == std::string_view::npos || close < open;
}

ReasoningSplitter::Piece ReasoningSplitter::push(std::string_view text) {
  held_.append(text);
  Piece out;
  run(out, false);
  return out;
}

ReasoningSplitter::Piece ReasoningSplitter::finish() {
  Piece out;
  run(out, true);
  return out;
}

void ReasoningSplitter::run(Piece& out, bool final) {
  for (;;) {
    if (state_ == State::kStart) {
      // Whitespace, then either the opening marker or the content.
      size_t i = 0;
      while (i < held_.size() && is_space(held_[i])) ++i;
      const std::string_view rest = std::string_view(held_).substr(i);
      if (rest.substr(0, open_.size()) == open_) {
        held_.erase(0, i + open_.size());
        state_ = State::kInside;
        continue;
      }
      if (!final && open_.substr(0, rest.size()) == rest) return;  // may still open
      state_ = State::kContent;
      continue;
    }
    if (state_ == State::kInside) {
      if (!reasoning_started_) {
        if (!drop_leading_space(held_)) return;
        reasoning_started_ = true;
      }
      const size_t close = held_.find(close_);
      if (close != std::string::npos) {
        out.reasoning += held_.substr(0, close);
        held_.erase(0, close + close_.size());
        state_ = State::kContent;
        continue;
      }
      const size_t keep = final ? 0 : partial_marker(held_, close_);
      out.reasoning += held_.substr(0, held_.size() - keep);
      held_.erase(0, held_.size() - keep);
      return;
    }
    // Content: its leading whitespace (the newlines after the block) dropped.
    if (!content_started_) {
      if (!drop_leading_space(held_)) return;
      content_started_ = true;
    }
    out.content += held_;
    held_.clear();
    return;
  }
}

ReasoningSplitter::Piece split_reasoning(std::string_view answer, bool inside, std::string_view open,
                                         std::string_view close) {
  ReasoningSplitter s(inside, open, close);
  ReasoningSplitter::Piece p = s.push(answer), q = s.finish();
  p.reasoning += q.reasoning;
  p.content += q.content;
  p.reasoning = std::string(trim(p.reasoning));
  p.content = std::string(trim(p.content));
  return p;
}

}  // namespace kvserve
