#include "text/utf8.h"

namespace kvserve {

int utf8_sequence_length(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  int n;
  char32_t min_cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) { n = 2; min_cp = 0x80; }
  else if (c >= 0xE0 && c <= 0xEF) { n = 3; min_cp = 0x800; }
  else if (c >= 0xF0 && c <= 0xF4) { n = 4; min_cp = 0x10000; }
  else return 0;
  char32_t cp = c & (0x7F >> n);
  size_t have = s.size() - i;
  for (int k = 1; k < n; ++k) {
    if (static_cast<size_t>(k) >= have) {
      return -k;  // unfinished; the bytes so far passed the checks below
    }
    unsigned char cc = b(i + k);
    if ((cc & 0xC0) != 0x80) return 0;
    // Reject overlong forms, surrogates and code points past U+10FFFF as early as the 2nd byte.
    if (k == 1) {
      if (c == 0xE0 && cc < 0xA0) return 0;
      if (c == 0xED && cc > 0x9F) return 0;
      if (c == 0xF0 && cc < 0x90) return 0;
      if (c == 0xF4 && cc > 0x8F) return 0;
    }
    cp = (cp << 6) | (cc & 0x3F);
  }
  return cp >= min_cp ? n : 0;
}

bool utf8_is_valid(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    int n = utf8_sequence_length(s, i);
    if (n <= 0) return false;
    i += n;
  }
  return true;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string utf8_take_complete(std::string& pending, bool final) {
  std::string out;
  size_t i = 0;
  while (i < pending.size()) {
    int n = utf8_sequence_length(pending, i);
    if (n > 0) {
      out.append(pending, i, n);
      i += n;
    } else if (n < 0 && !final) {
      break;  // wait for the rest of this character
    } else {
      utf8_append(out, 0xFFFD);
      i += n < 0 ? -n : 1;
    }
  }
  pending.erase(0, i);
  return out;
}

}  // namespace kvserve
