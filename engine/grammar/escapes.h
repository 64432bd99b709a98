// UTF-8 for the grammar parsers: text/utf8.h's encoder and validator, and the code point.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "text/utf8.h"

namespace kvserve::grammar {

inline void append_utf8(std::string& out, uint32_t cp) { utf8_append(out, cp); }

// Decodes one well-formed UTF-8 character at the start of s: its length, or 0 when malformed.
inline size_t decode_utf8(std::string_view s, uint32_t* cp) {
  if (s.empty()) return 0;
  const int n = utf8_sequence_length(s, 0);
  if (n <= 0) return 0;
  const auto b0 = static_cast<uint8_t>(s[0]);
  uint32_t v = n == 1 ? b0 : b0 & (0x7Fu >> n);
  for (int i = 1; i < n; ++i) v = (v << 6) | (static_cast<uint8_t>(s[i]) & 0x3Fu);
  *cp = v;
  return static_cast<size_t>(n);
}

}  // namespace kvserve::grammar
