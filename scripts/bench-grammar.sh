#!/usr/bin/env bash
# What constrained decoding costs on a 152k-token vocabulary (deepseek-llm's byte-level BPE from
# ../shared, padded with joined pieces to Qwen's 152,064): mask time per token over the project's
# JSON schemas (tests/data/constraints/schemas.jsonl; first walks and later ones), and decode
# throughput with a schema at 1 and 16 streams as a fraction of unconstrained, measured in the
# same run on a 1024-wide, 8-layer Q8_0 model of that vocabulary. Writes bench-results/grammar.txt
# and grammar.json. Extra arguments go to kvserve-bench-grammar (--gen, --repeats, --batches, ...).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="${KVSERVE_BENCH_DIR:-$root/bench-results}"
shared="${KVSERVE_SHARED_DIR:-$root/../shared}"
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
if [ ! -x "$build/engine/kvserve-bench-grammar" ] || [ ! -x "$build/engine/kvserve-mkmodel" ]; then
  "$root/scripts/deps.sh"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j "$(nproc)" --target kvserve-bench-grammar kvserve-mkmodel
fi
mkdir -p "$out" "$build/models"
model="$build/models/vocab152k-1024x8-q8_0.gguf"
[ -f "$model" ] || "$build/engine/kvserve-mkmodel" --out "$model" --vocab-from "$shared/models/vocab/ggml-vocab-deepseek-llm.gguf" \
  --vocab 152064 --dim 1024 --layers 8 --heads 16 --kv-heads 4 --ffn 2816 --dtype Q8_0 >/dev/null
"$build/engine/kvserve-bench-grammar" --model "$model" --cases "$root/tests/data/constraints/schemas.jsonl" \
  --json "$out/grammar.json" "$@" 2>/dev/null | tee "$out/grammar.txt"
