// The error every load and configuration failure throws: start-up stops with a message that
// names the file or field. A leaf type so that any layer may throw it.
#pragma once

#include <stdexcept>

namespace kvserve {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvserve
