// Helpers shared by the tests: where the public test data lives, and the skip-or-fail rule.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kvserve::testing {

inline std::string shared_model(const std::string& name) {
  return std::string(KVSERVE_SHARED_DIR) + "/models/" + name;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// s without leading and trailing whitespace (how llama.cpp's tests compare parsed texts).
inline std::string trimmed(std::string s) {
  const auto sp = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  while (!s.empty() && sp(s.back())) s.pop_back();
  size_t i = 0;
  while (i < s.size() && sp(s[i])) ++i;
  return s.substr(i);
}

}  // namespace kvserve::testing

// Skips the test with a visible message when a ../shared file is absent; fails under CI=true.
#define KVSERVE_REQUIRE_SHARED_FILE(path)                                                    \
  do {                                                                                       \
    if (!std::filesystem::exists(path)) {                                                    \
      if (KVSERVE_REQUIRE_SHARED) FAIL() << "missing test data " << (path) << " (CI=true)";  \
      GTEST_SKIP() << "test data " << (path) << " not found; skipping";                      \
    }                                                                                        \
  } while (0)
