#!/usr/bin/env bash
# Builds the test suite with AddressSanitizer + UndefinedBehaviorSanitizer (Debug, no
# -march=native) in build-asan/ and runs it through ctest. Slow: not part of CI's run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_ASAN_BUILD_DIR:-$root/build-asan}"
"$root/scripts/deps.sh"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/kvserve-ccache}" CCACHE_BASEDIR="$root"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVSERVE_NATIVE=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" -j "$(nproc)"
# oneDNN's JIT and libgomp are not instrumented; leaks inside them are reported as theirs.
# A small quarantine: the soak test bounds RSS growth, and ASan keeps freed memory 256 MB deep by default.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:quarantine_size_mb=16" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
cd "$build" && ctest --output-on-failure -j "$(nproc)" "$@"
