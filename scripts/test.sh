#!/usr/bin/env bash
# Installs what is missing, builds kvserve in Release and runs every test through ctest.
# CI=true makes tests that need ../shared fail (instead of skip) when it is absent.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"

"$root/scripts/deps.sh" --test
# The spin count serve.sh and the image use (see serve.sh); ctest sets it for each test too.
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"

require_shared=OFF
[ "${CI:-}" = "true" ] && require_shared=ON

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/kvserve-ccache}"
# Paths relative to the checkout, so a fresh clone elsewhere still hits the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
start=$(date +%s)
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DKVSERVE_WERROR=ON -DKVSERVE_REQUIRE_SHARED="$require_shared" >/dev/null
cmake --build "$build" -j "$(nproc)"
echo "build took $(( $(date +%s) - start )) s" >&2

# libFuzzer targets (clang): the GGUF reader and the tokenizers, each for a bounded time on the
# seed corpus in tests/fuzz/corpus. Run before the main suite so its summary comes last.
if [ "${KVSERVE_SKIP_FUZZ:-}" != 1 ] && command -v clang++ >/dev/null; then
  CC=clang CXX=clang++ cmake -S "$root/tests/fuzz" -B "$build-fuzz" -DKVSERVE_SHARED_DIR="$root/../shared" \
    -DFUZZ_SECONDS="${KVSERVE_FUZZ_SECONDS:-20}" >/dev/null
  cmake --build "$build-fuzz" -j "$(nproc)"
  (cd "$build-fuzz" && ctest --output-on-failure)
fi

cd "$build"
ctest --output-on-failure -j "$(nproc)" "$@"
echo "test.sh: total $(( $(date +%s) - start )) s" >&2
