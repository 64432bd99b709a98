#!/usr/bin/env bash
# kvserve beside llama.cpp on the same GGUF files, alternating, with every figure also held
# against the machine's own limits (kvserve-bench-engine's honest probe: the best plain read of
# 1 GiB, the int8 dot-product and fp32 FMA peaks). For each type of the ~110M synthetic shape:
# prompt-512 and one-stream decode (llama-bench -p 512 -n 128 against kvserve-bench-engine
# --prompt-len 512 --gen 128), and batched decode at 16 and 64 sequences of 128 + 128 tokens
# (llama-batched-bench, when built, against kvserve-bench-engine --batches 16,64). Both keep
# the K/V cache in F16 (llama.cpp's default).
# LLAMA_CPP_BIN: the directory of llama-bench (and llama-batched-bench), built outside the
# project (docs/performance.md says how). Writes bench-results/vs-llamacpp.md.
# Usage: LLAMA_CPP_BIN=DIR scripts/bench-vs-llamacpp.sh [--quick] [TYPES...]  (default q4_k_m q8_0 f16)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="${KVSERVE_BENCH_DIR:-$root/bench-results}"
: "${LLAMA_CPP_BIN:?set LLAMA_CPP_BIN to the directory of llama-bench}"
quick=0; [ "${1:-}" = --quick ] && { quick=1; shift; }
types=("$@"); [ ${#types[@]} -gt 0 ] || types=(q4_k_m q8_0 f16)
rounds=2; [ "$quick" = 1 ] && rounds=1
mkdir -p "$out/vs-llamacpp"
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
cmake --build "$build" -j "$(nproc)" --target kvserve-bench-engine kvserve-mkmodel kvserve-quantize > /dev/null
. "$root/scripts/bench-common.sh"
synthetic=$(synthetic_model 768 12 12 2048)
threads=$(nproc)
for t in "${types[@]}"; do
  file="${synthetic%-f32.gguf}-${t^^}.gguf"
  [ -f "$file" ] || "$build/engine/kvserve-quantize" "$synthetic" "$file" "${t^^}" > /dev/null
  for r in $(seq "$rounds"); do
    "$LLAMA_CPP_BIN/llama-bench" -m "$file" -p 512 -n 128 -t "$threads" -r 3 -o json \
      > "$out/vs-llamacpp/$t-llama-bench-$r.json" 2> /dev/null
    if [ -x "$LLAMA_CPP_BIN/llama-batched-bench" ]; then
      "$LLAMA_CPP_BIN/llama-batched-bench" -m "$file" -c 16384 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 16,64 \
        -t "$threads" --output-format jsonl 2> /dev/null | grep '^{' > "$out/vs-llamacpp/$t-llama-batched-$r.jsonl" || true
    fi
    "$build/engine/kvserve-bench-engine" --model "$file" --kv-dtype f16 --prompt-len 512 --gen 128 --batches 16,64 \
      --batch-prompt 128 --batch-gen 128 --json "$out/vs-llamacpp/$t-kvserve-$r.json" > /dev/null 2>&1
  done
done
/usr/bin/python3 - "$out/vs-llamacpp" "$rounds" "${types[@]}" <<'PY' | tee "$out/vs-llamacpp.md"
import json, os, statistics, sys
d, rounds, types = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
med = statistics.median
print(f"| ~110M synthetic | llama.cpp pp512 | kvserve | ratio | llama.cpp tg128 | kvserve | ratio | kvserve decode, share of plain read | "
      f"llama.cpp 16 / 64 seqs | kvserve | ratios | kvserve 16 / 64, share of int8 peak |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for t in types:
    lp, lg, kp, kg, share, b16, b64, k16, k64, s16, s64 = ([] for _ in range(11))
    limits = None
    for r in range(1, rounds + 1):
        for e in json.load(open(f"{d}/{t}-llama-bench-{r}.json")):
            (lp if e["n_prompt"] > 0 else lg).append(e["avg_ts"])
        k = json.load(open(f"{d}/{t}-kvserve-{r}.json"))
        kp.append(k["prompt_tps"]); kg.append(k["decode1_tps"]); share.append(k["decode1_share_plain_read"])
        k16.append(k["aggregate_decode_tps"]["16"]); k64.append(k["aggregate_decode_tps"]["64"])
        s16.append(k["aggregate_share_int8_peak"]["16"]); s64.append(k["aggregate_share_int8_peak"]["64"])
        limits = (k["plain_read_gbs"], k["int8_peak_gops"], k["fma_peak_gflops"])
        path = f"{d}/{t}-llama-batched-{r}.jsonl"
        if os.path.exists(path):
            for line in open(path):
                e = json.loads(line)
                (b16 if e["pl"] == 16 else b64).append(e["speed_tg"])
    batched = f"{med(b16):.0f} / {med(b64):.0f}" if b16 and b64 else "not run"
    ratios = f"{med(k16) / med(b16):.2f}x / {med(k64) / med(b64):.2f}x" if b16 and b64 else "-"
    print(f"| {t} | {med(lp):.0f} | {med(kp):.0f} | {med(kp) / med(lp):.2f}x | {med(lg):.1f} | {med(kg):.1f} | "
          f"{med(kg) / med(lg):.2f}x | {100 * med(share):.0f}% | {batched} | {med(k16):.0f} / {med(k64):.0f} | {ratios} | "
          f"{100 * med(s16):.1f}% / {100 * med(s64):.1f}% |")
print(f"\nLimits of the last run: plain read {limits[0]:.1f} GB/s, int8 {limits[1]:.0f} GOPS, fp32 {limits[2]:.0f} GFLOP/s; "
      f"medians of {rounds} alternating round(s).")
PY
