#!/usr/bin/env bash
# Installs what is missing, builds kvserve in Release and runs every test through ctest.
# CI=true makes tests that need ../shared fail (instead of skip) when it is absent.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"

"$root/scripts/deps.sh"

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

cd "$build"
ctest --output-on-failure -j "$(nproc)" "$@"
echo "test.sh: total $(( $(date +%s) - start )) s" >&2
