#include "text/answer_parser.h"

#include <algorithm>

#include "text/tool_call_scan.h"

namespace kvserve {
namespace {

constexpr std::string_view kChannel = "<|channel|>", kMessage = "<|message|>", kStart = "<|start|>";
constexpr std::string_view kHarmonyEnds[] = {"<|end|>", "<|call|>", "<|return|>", kStart, kChannel};

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool all_space(std::string_view s) { return std::all_of(s.begin(), s.end(), is_space); }

std::string trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

// The longest suffix of s that is a proper prefix of m.
size_t partial(std::string_view s, std::string_view m) {
  for (size_t n = std::min(s.size(), m.size() - 1); n > 0; --n)
    if (s.substr(s.size() - n) == m.substr(0, n)) return n;
  return 0;
}

// s begins with m, or is the beginning of m.
bool begins(std::string_view s, std::string_view m) {
  const size_t n = std::min(s.size(), m.size());
  return s.substr(0, n) == m.substr(0, n);
}

void append(ParsedAnswer& to, ParsedAnswer&& from) {
  to.reasoning += from.reasoning;
  to.content += from.content;
  for (ToolCall& c : from.calls) to.calls.push_back(std::move(c));
}

}  // namespace

AnswerParser::AnswerParser(AnswerFormat format) : format_(std::move(format)) {
  if (format_.tools != ToolFormat::kHarmony && !format_.reasoning.open.empty())
    split_.emplace(format_.reasoning_open, format_.reasoning.open, format_.reasoning.close);
}

ParsedAnswer AnswerParser::push(std::string_view text) {
  ParsedAnswer out;
  if (format_.tools == ToolFormat::kHarmony) {
    held_.append(text);
    run_harmony(out, false);
  } else if (split_) {
    ReasoningSplitter::Piece p = split_->push(text);
    out.reasoning = std::move(p.reasoning);
    run_tools(p.content, out, false);
  } else {
    run_tools(text, out, false);
  }
  return out;
}

ParsedAnswer AnswerParser::finish() {
  ParsedAnswer out;
  if (format_.tools == ToolFormat::kHarmony) {
    run_harmony(out, true);
  } else if (split_) {
    ReasoningSplitter::Piece p = split_->finish();
    out.reasoning = std::move(p.reasoning);
    run_tools(p.content, out, true);
  } else {
    run_tools({}, out, true);
  }
  return out;
}

void AnswerParser::add_content(ParsedAnswer& out, std::string_view text) {
  if (text.empty()) return;
  out.content.append(text);
  content_started_ = true;
  if (!all_space(text)) after_call_ = false;
}

void AnswerParser::run_tools(std::string_view content, ParsedAnswer& out, bool final) {
  held_.append(content);
  if (!format_.parse_tools) {
    add_content(out, held_);
    held_.clear();
    return;
  }
  const ToolFormat f = format_.tools;
  for (;;) {
    const bool at_start = !content_started_;
    const tool_calls::Marker m = tool_calls::find_start(f, held_, at_start);
    if (m.pos == std::string::npos) {
      const size_t keep = final ? 0 : tool_calls::partial_start(f, held_, at_start);
      const std::string_view settled = std::string_view(held_).substr(0, held_.size() - keep);
      if (after_call_ && all_space(settled)) {
        // Whitespace between and after calls is no content; before more text it is.
        if (final) held_.clear();
        return;
      }
      add_content(out, settled);
      held_.erase(0, settled.size());
      return;
    }
    const std::string_view before = std::string_view(held_).substr(0, m.pos);
    if (!all_space(before)) add_content(out, before);
    held_.erase(0, m.pos);
    tool_calls::Scan s = tool_calls::scan(f, held_, 0, final, format_.declared);
    if (s.status == tool_calls::Scan::kIncomplete) {
      if (!final) return;
      s.status = tool_calls::Scan::kBad;
    }
    if (s.status == tool_calls::Scan::kOk) {
      for (ToolCall& c : s.calls) out.calls.push_back(std::move(c));
      add_content(out, s.content);
      held_.erase(0, s.end);
      content_started_ = true;
      after_call_ = !s.calls.empty();
      continue;
    }
    // Not a call after all: its first byte (or marker) is content, and the scan goes on.
    const size_t n = std::max<size_t>(m.len, 1);
    add_content(out, std::string_view(held_).substr(0, n));
    held_.erase(0, n);
  }
}

// gpt-oss's harmony messages: [<|start|>assistant][ to=functions.NAME]<|channel|>CHANNEL[ to=...]
// [<|constrain|>json]<|message|>BODY, the body ending at <|end|>, <|call|>, <|return|> or the
// next header. analysis is reasoning, final (and commentary without a recipient) content, a
// message to functions.NAME a call.
void AnswerParser::run_harmony(ParsedAnswer& out, bool final) {
  for (;;) {
    if (channel_ == Channel::kNone) {
      const size_t msg = held_.find(kMessage);
      if (msg == std::string::npos) {
        // A header is short; text that is no header at all (a model answering plainly) is content.
        const bool header_like = begins(held_, kStart) || begins(held_, kChannel);
        if (final || !header_like) {
          if (!header_like) {
            const size_t next = std::min(held_.find(kStart), held_.find(kChannel));
            const size_t n = next == std::string::npos ? (final ? held_.size() : held_.size() - partial(held_, kStart))
                                                       : next;
            out.content += held_.substr(0, n);
            held_.erase(0, n);
            if (!held_.empty() && next != std::string::npos) continue;
            return;
          }
          held_.clear();
        }
        return;
      }
      const std::string header = held_.substr(0, msg);
      held_.erase(0, msg + kMessage.size());
      std::string channel;
      if (const size_t c = header.find(kChannel); c != std::string::npos) {
        size_t e = c + kChannel.size();
        while (e < header.size() && !is_space(header[e]) && header[e] != '<') ++e;
        channel = header.substr(c + kChannel.size(), e - c - kChannel.size());
      }
      recipient_.clear();
      if (const size_t to = header.find("to=functions."); to != std::string::npos) {
        size_t e = to + 13;
        while (e < header.size() && !is_space(header[e]) && header[e] != '<') ++e;
        recipient_ = header.substr(to + 13, e - to - 13);
      }
      if (!recipient_.empty()) channel_ = format_.parse_tools ? Channel::kCall : Channel::kSkip;
      else if (channel == "analysis") channel_ = Channel::kReasoning;
      else if (channel == "final" || channel == "commentary") channel_ = Channel::kContent;
      else channel_ = Channel::kSkip;
      continue;
    }
    size_t end = std::string::npos, marker = 0;
    for (std::string_view m : kHarmonyEnds)
      if (const size_t p = held_.find(m); p < end) end = p, marker = m.size();
    const bool opens_next = end != std::string::npos &&
                            (held_.compare(end, kStart.size(), kStart) == 0 || held_.compare(end, kChannel.size(), kChannel) == 0);
    if (end == std::string::npos) {
      if (channel_ == Channel::kCall && !final) return;
      size_t keep = 0;
      if (!final)
        for (std::string_view m : kHarmonyEnds) keep = std::max(keep, partial(held_, m));
      end = held_.size() - keep;
      marker = 0;
    }
    const std::string body = held_.substr(0, end);
    if (channel_ == Channel::kReasoning) out.reasoning += body;
    else if (channel_ == Channel::kContent) out.content += body;
    const bool closed = marker > 0 || final;
    if (channel_ == Channel::kCall && closed)
      out.calls.push_back({"", recipient_, tool_calls::arguments_text(trim(body))});
    held_.erase(0, end + (opens_next ? 0 : marker));
    if (!closed) return;
    channel_ = Channel::kNone;
    if (held_.empty() && !final) return;
    if (held_.empty()) return;
  }
}

ParsedAnswer parse_answer(std::string_view answer, const AnswerFormat& format) {
  AnswerParser p(format);
  ParsedAnswer out = p.push(answer);
  append(out, p.finish());
  out.reasoning = trim(out.reasoning);
  out.content = trim(out.content);
  return out;
}

}  // namespace kvserve
