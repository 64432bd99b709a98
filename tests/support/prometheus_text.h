// Reading a Prometheus text exposition in tests.
#pragma once

#include <regex>
#include <string>

namespace kvserve::testing {

// The value of the sample named exactly `series` (labels included), or -1 when absent.
inline double metric_value(const std::string& text, const std::string& series) {
  std::smatch m;
  const std::regex re("(^|\\n)" + std::regex_replace(series, std::regex(R"([{}"+.])"), R"(\$&)") + " ([0-9.e+-]+)");
  if (!std::regex_search(text, m, re)) return -1;
  return std::stod(m[2]);
}

}  // namespace kvserve::testing
