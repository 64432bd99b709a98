// Small UTF-8 helpers shared by the tokenizers, the streaming detokenizer and request checks.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kvserve {

// Length of the UTF-8 sequence starting at s[i]: 1..4 for a well-formed character; 0 if the
// bytes there are malformed; -n (n > 0) if s ends after n bytes of an unfinished character.
int utf8_sequence_length(std::string_view s, size_t i);

bool utf8_is_valid(std::string_view s);

// Appends the UTF-8 encoding of code point cp.
void utf8_append(std::string& out, char32_t cp);

// Moves the complete prefix of `pending` into the return value: malformed bytes become U+FFFD,
// an unfinished character at the end stays in `pending` unless `final` is set.
std::string utf8_take_complete(std::string& pending, bool final);

}  // namespace kvserve
