#!/usr/bin/env bash
# Full-context requests of a Gemma-3-shaped model (five local layers to one global) running at
# once in a fixed KV budget, with windowed layers releasing the blocks behind their window and
# with every block kept (cache.release_windowed_blocks), beside the factor the bytes a request
# holds predict; both runs in the same process. Writes bench-results/window.txt.
# Extra arguments go to kvserve-bench-window (--layers, --window, --context, --requests, ...).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="${KVSERVE_BENCH_DIR:-$root/bench-results}"
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
if [ ! -x "$build/engine/kvserve-bench-window" ]; then
  "$root/scripts/deps.sh"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j "$(nproc)" --target kvserve-bench-window
fi
mkdir -p "$out" "$build/models"
"$build/engine/kvserve-bench-window" --models-dir "$build/models" "$@" 2>/dev/null | tee "$out/window.txt"
