#include "text/output_text.h"

#include <algorithm>

namespace kvserve {

OutputText::OutputText(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt,
                       std::vector<std::string> stops, bool special)
    : decoder_(tokenizer, prompt, special), stops_(std::move(stops)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

std::string OutputText::push(int32_t token) {
  if (stopped_) return {};
  pending_ += decoder_.push(token);
  return release(false);
}

std::string OutputText::finish() {
  if (stopped_) return {};
  pending_ += decoder_.flush();
  return release(true);
}

std::string OutputText::release(bool final) {
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, pending_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, first);
    pending_.clear();
    return out;
  }
  size_t hold = 0;
  if (!final) {
    // The longest suffix of pending_ that some stop string starts with.
    for (const auto& s : stops_) {
      for (size_t len = std::min(s.size() - 1, pending_.size()); len > hold; --len) {
        if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
          hold = len;
          break;
        }
      }
    }
  }
  std::string out = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

}  // namespace kvserve
