// Client bytes in log lines: printable ASCII passes, everything else (newlines, escapes,
// non-ASCII, invalid UTF-8) is written as \xHH, and long values are cut, so a client can
// neither forge log lines nor flood the log.
#pragma once

#include <string>
#include <string_view>

namespace kvserve {

std::string log_escape(std::string_view text, size_t max_bytes = 160);

}  // namespace kvserve
