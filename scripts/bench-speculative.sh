#!/usr/bin/env bash
# Speculative decoding (prompt lookup) for one stream: kvserve-bench-speculative's verification
# cost (a pass over 1+K rows against 1, at a 512-token context) on the ~110M synthetic shape,
# and one greedy stream with speculative.method "off" against "ngram", alternating, on
# stories260K (llama2.c's model: real, repetitive text) and on the ~110M synthetic shape (random
# weights: text that seldom repeats). Writes bench-results/speculative.md.
# Usage: scripts/bench-speculative.sh [--quick]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="${KVSERVE_BENCH_DIR:-$root/bench-results}"
shared="${KVSERVE_SHARED_DIR:-$root/../shared}"
quick=0; [ "${1:-}" = --quick ] && quick=1
mkdir -p "$out"
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
cmake --build "$build" -j "$(nproc)" --target kvserve-bench-speculative kvserve-mkmodel > /dev/null
. "$root/scripts/bench-common.sh"
synthetic=$(synthetic_model 768 12 12 2048)
reps=30 rounds=3; [ "$quick" = 1 ] && reps=10 rounds=1
bench="$build/engine/kvserve-bench-speculative"
{
  echo "### Verification cost, ~110M synthetic (F32), one sequence"
  "$bench" --model "$synthetic" --part cost --reps "$reps"
  echo
  echo "### One stream, off against ngram (alternating, $rounds rounds)"
  "$bench" --model "$shared/models/stories260K.gguf" --part stream --tokens 256 --requests 3 --rounds "$rounds"
  "$bench" --model "$synthetic" --part stream --tokens 256 --requests 2 --rounds "$rounds" | tail -1
} | tee "$out/speculative.md"
