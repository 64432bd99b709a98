#!/usr/bin/env bash
# Long context: 16 sequences of 1,536 prompt tokens + 64 generated on the ~110M synthetic
# Q4_K_M, f16 and q8_0 KV caches, where a decode step reads far more K/V than weights. kvserve's
# decode is held against the plain read bandwidth over the bytes a step reads (the weights once,
# every sequence's K/V at the run's mean context: kvserve-bench-engine's aggregate_share_plain_read),
# and, with LLAMA_CPP_BIN, against llama-batched-bench b10472 with flash attention on the same
# file and load (decode and prefill), alternating. Writes bench-results/long-context.md.
# Usage: [LLAMA_CPP_BIN=DIR] scripts/bench-long-context.sh [--quick]  (--quick: one round)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="${KVSERVE_BENCH_DIR:-$root/bench-results}"
rounds=2; [ "${1:-}" = --quick ] && rounds=1
mkdir -p "$out/long-context"
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
cmake --build "$build" -j "$(nproc)" --target kvserve-bench-engine kvserve-mkmodel kvserve-quantize > /dev/null
. "$root/scripts/bench-common.sh"
synthetic=$(synthetic_model 768 12 12 2048)
file="${synthetic%-f32.gguf}-Q4_K_M.gguf"
[ -f "$file" ] || "$build/engine/kvserve-quantize" "$synthetic" "$file" Q4_K_M > /dev/null
prompt=1536 gen=64 seqs=16 threads=$(nproc)
for kv in f16 q8_0; do
  for r in $(seq "$rounds"); do
    if [ -n "${LLAMA_CPP_BIN:-}" ]; then
      "$LLAMA_CPP_BIN/llama-batched-bench" -m "$file" -t "$threads" -c $((seqs * (prompt + gen) + 256)) -b 2048 -ub 512 \
        -npp "$prompt" -ntg "$gen" -npl "$seqs" -fa on -ctk "$kv" -ctv "$kv" --output-format jsonl 2> /dev/null \
        | grep '^{' > "$out/long-context/$kv-llama-$r.jsonl" || true
    fi
    "$build/engine/kvserve-bench-engine" --model "$file" --kv-dtype "$kv" --prompt-len 16 --gen 8 --batches "$seqs" \
      --batch-prompt "$prompt" --batch-gen "$gen" --json "$out/long-context/$kv-kvserve-$r.json" > /dev/null 2>&1
  done
done
/usr/bin/python3 - "$out/long-context" "$rounds" "$seqs" "$prompt" "$gen" <<'PY' | tee "$out/long-context.md"
import json, os, statistics, sys
d, rounds, seqs, prompt, gen = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
med = statistics.median
print(f"| ~110M Q4_K_M, {seqs} x ({prompt} + {gen}) | kvserve decode tok/s | share of the read over weights + K/V a step | "
      f"llama.cpp (flash attention) decode | ratio | kvserve prefill tok/s | llama.cpp prefill | ratio |")
print("|---|---|---|---|---|---|---|---|")
for kv in ("f16", "q8_0"):
    kd, share, kp, ld, lp, step = [], [], [], [], [], None
    for r in range(1, rounds + 1):
        k = json.load(open(f"{d}/{kv}-kvserve-{r}.json"))
        kd.append(k["aggregate_decode_tps"][seqs]); share.append(k["aggregate_share_plain_read"][seqs])
        kp.append(k["aggregate_prefill_tps"][seqs]); step = k["aggregate_step_bytes"][seqs]
        path = f"{d}/{kv}-llama-{r}.jsonl"
        if os.path.exists(path):
            for line in open(path):
                e = json.loads(line)
                ld.append(e["speed_tg"]); lp.append(e["speed_pp"])
    llama = (f"{med(ld):.0f} | {med(kd) / med(ld):.2f}x" if ld else "not run | -")
    llama_pp = (f"{med(lp):.0f} | {med(kp) / med(lp):.2f}x" if lp else "not run | -")
    print(f"| {kv} KV | {med(kd):.0f} | {100 * med(share):.0f}% of {step / 1e6:.0f} MB | {llama} | {med(kp):.0f} | {llama_pp} |")
print(f"\nMedians of {rounds} alternating round(s).")
PY
