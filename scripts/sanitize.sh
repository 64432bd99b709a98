#!/usr/bin/env bash
# Sanitizer builds of the test suite (RelWithDebInfo), each in a folder of its own:
#   scripts/sanitize.sh [ctest args]           AddressSanitizer + UBSan, whole suite, build-asan/
#   scripts/sanitize.sh --thread [ctest args]  ThreadSanitizer, the "concurrency" label (engine-level
#                                              thread tests; why not the gRPC ones: tests/support/tsan.supp), build-tsan/
# Slow: not part of CI's run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
mode=address
if [ "${1:-}" = --thread ]; then mode=thread; shift; fi
"$root/scripts/deps.sh" --test
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/kvserve-ccache}" CCACHE_BASEDIR="$root"
if [ "$mode" = address ]; then
  build="${KVSERVE_ASAN_BUILD_DIR:-$root/build-asan}"
  flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined"
  labels=()
  pin=()
  # oneDNN's JIT and libgomp are not instrumented; leaks inside them are reported as theirs.
  # A small quarantine: the soak test bounds RSS growth, and ASan keeps freed memory 256 MB deep by default.
  export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:quarantine_size_mb=16" UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
else
  build="${KVSERVE_TSAN_BUILD_DIR:-$root/build-tsan}"
  flags="-fsanitize=thread -fno-omit-frame-pointer"
  labels=(-L concurrency)
  # libgomp and oneDNN are not instrumented, so TSan cannot see OpenMP's barriers: one OpenMP
  # thread keeps the compute kernels on the calling thread. Our threads all remain (the engine
  # loop, submitters, cancellers, sinks). The engine sizes its team from the CPUs in the
  # affinity mask (not OMP_NUM_THREADS), so the tests run pinned to one CPU (below).
  export OMP_NUM_THREADS=1
  pin=(taskset -c 0)
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/tests/support/tsan.supp"
fi
# -Werror off: GCC 12 reports maybe-uninitialized inside libstdc++ (std::regex, std::function)
# under sanitizer instrumentation; the Release build in CI keeps warnings as errors.
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVSERVE_NATIVE=ON -DKVSERVE_WERROR=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="${flags%% -fno*}" >/dev/null
cmake --build "$build" -j "$(nproc)"
cd "$build" && "${pin[@]}" ctest --output-on-failure -j "$(nproc)" "${labels[@]}" "$@"
