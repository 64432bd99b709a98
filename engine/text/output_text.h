// A request's generated text as it streams: whole UTF-8 characters only, and never any part of
// a stop string. Text that might be the start of a stop string is held back until it is known
// not to be one; once a stop string appears, the text ends just before it.
#pragma once

#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace kvserve {

class OutputText {
 public:
  // special: control tokens written as their text (IncrementalDecoder).
  OutputText(const Tokenizer& tokenizer, const std::vector<int32_t>& prompt, std::vector<std::string> stops,
             bool special = false);

  // Adds one generated token; returns the text that is now safe to send.
  std::string push(int32_t token);
  // At the end of generation: everything still held back.
  std::string finish();
  // True once a stop string has been found (nothing more will be returned).
  bool stopped() const { return stopped_; }

 private:
  std::string release(bool final);

  IncrementalDecoder decoder_;
  std::vector<std::string> stops_;
  std::string pending_;  // decoded, not yet sent
  bool stopped_ = false;
};

}  // namespace kvserve
