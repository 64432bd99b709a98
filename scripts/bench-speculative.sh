#!/usr/bin/env bash
# Speculative decoding: kvserve-bench-speculative's verification cost (a pass over 1+K rows
# against 1, at a 512-token context) on the ~110M synthetic shape; one greedy stream with
# speculative.method "off" against "ngram", alternating, on stories260K (llama2.c's model: real,
# repetitive text) and on the ~110M synthetic shape in F16 (random weights: text that seldom
# repeats); the same F16 stream against a draft model, its own Q8_0 and Q4_0 files; and 16
# concurrent streams with each method against off. Writes bench-results/speculative.md.
# Usage: scripts/bench-speculative.sh [--quick]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="${KVSERVE_BENCH_DIR:-$root/bench-results}"
shared="${KVSERVE_SHARED_DIR:-$root/../shared}"
quick=0; [ "${1:-}" = --quick ] && quick=1
mkdir -p "$out"
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
cmake --build "$build" -j "$(nproc)" --target kvserve-bench-speculative kvserve-mkmodel kvserve-quantize > /dev/null
. "$root/scripts/bench-common.sh"
synthetic=$(synthetic_model 768 12 12 2048)
for t in F16 Q8_0 Q4_0; do
  [ -f "${synthetic%-f32.gguf}-$t.gguf" ] || "$build/engine/kvserve-quantize" "$synthetic" "${synthetic%-f32.gguf}-$t.gguf" "$t" > /dev/null
done
f16="${synthetic%-f32.gguf}-F16.gguf"
reps=30 rounds=3 streams_tokens=64; [ "$quick" = 1 ] && reps=10 rounds=1
bench="$build/engine/kvserve-bench-speculative"
{
  echo "### Verification cost, ~110M synthetic (F32), one sequence"
  "$bench" --model "$synthetic" --part cost --reps "$reps"
  echo
  echo "### One stream, off against each proposer (alternating, $rounds rounds)"
  "$bench" --model "$shared/models/stories260K.gguf" --part stream --tokens 256 --requests 3 --rounds "$rounds"
  "$bench" --model "$f16" --part stream --tokens 256 --requests 2 --rounds "$rounds" | tail -1
  for t in Q8_0 Q4_0; do
    "$bench" --model "$f16" --part stream --tokens 256 --requests 2 --rounds "$rounds" --method draft \
      --draft "${synthetic%-f32.gguf}-$t.gguf" | tail -1
  done
  echo
  echo "### 16 concurrent streams, off against each proposer (alternating, $rounds rounds)"
  "$bench" --model "$f16" --part stream --tokens "$streams_tokens" --requests 1 --rounds "$rounds" --streams 16
  "$bench" --model "$f16" --part stream --tokens "$streams_tokens" --requests 1 --rounds "$rounds" --streams 16 \
    --method draft --draft "${synthetic%-f32.gguf}-Q8_0.gguf" | tail -1
} | tee "$out/speculative.md"
