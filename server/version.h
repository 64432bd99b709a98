// The version the server reports: "0.8.0 (git describe)". Defined in a file CMake writes at
// configure time (version.cc.in), so a new commit recompiles that one file only.
#pragma once

namespace kvserve {
const char* server_version();
}  // namespace kvserve
