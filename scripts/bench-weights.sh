#!/usr/bin/env bash
# The weight-type table: kvserve-bench-engine on the ~110M (and, without --quick, ~1B) synthetic
# shapes in F32, F16, BF16 (held as BF16: --keep-bf16), Q8_0, Q4_0, Q4_K_M, Q5_K_M, Q6_K, Q3_K_M
# and Q2_K (quantized by kvserve-quantize's rules from the same F32 weights), each figure beside
# the bandwidth and compute limits measured in the same run (decode against the read bandwidth:
# read-only passes around each run over as many bytes as a step streams and over 1 GiB, and the
# hypervisor's steal time in each run; runs with steal above 5% are made again, see
# kvserve-bench-engine --calm-steal). Writes bench-results/weights-*.json and weights.md.
# Called by scripts/bench.sh.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="${KVSERVE_BENCH_DIR:-$root/bench-results}"
quick=0
[ "${1:-}" = "--quick" ] && quick=1
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
if [ ! -x "$build/engine/kvserve-bench-engine" ]; then
  "$root/scripts/deps.sh"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$build" -j "$(nproc)" --target kvserve-bench-engine
fi
mkdir -p "$out" "$build/models"
types="f32 f16 bf16 q8_0 q4_0 q4_k_m q5_k_m q6_k q3_k_m q2_k"
for t in $types; do
  keep=()
  [ "$t" = bf16 ] && keep=(--keep-bf16)
  "$build/engine/kvserve-bench-engine" --models-dir "$build/models" --kv-dtype f16 --dim 768 --layers 12 --heads 12 \
    --kv-heads 12 --ffn 2048 --vocab 32000 --dtype "$t" "${keep[@]}" --batches 16,64 --json "$out/weights-110m-$t.json" \
    | tee "$out/weights-110m-$t.txt"
  if [ "$quick" = 0 ]; then
    "$build/engine/kvserve-bench-engine" --models-dir "$build/models" --kv-dtype f16 --dim 2048 --layers 16 --heads 32 \
      --kv-heads 8 --ffn 5632 --vocab 32000 --dtype "$t" "${keep[@]}" --batches 1,16 --gen 32 --json "$out/weights-1b-$t.json" \
      | tee "$out/weights-1b-$t.txt"
  fi
done
/usr/bin/python3 - "$out" $types <<'PY'
import json, os, sys
out, types = sys.argv[1], sys.argv[2:]
rows = ["| shape | weights | MB streamed / step (weights + K/V) | prompt 512 tok/s (% of F32) | decode 1 seq tok/s, best run (median run's % of the read rate sustained around it over a step's bytes / over 1 GiB; most steal in a counted run) | aggregate decode 16 / 64 tok/s (% of F32) |",
        "|---|---|---|---|---|---|"]
for shape in ("110m", "1b"):
    f32 = None
    for t in types:
        p = os.path.join(out, f"weights-{shape}-{t}.json")
        if not os.path.exists(p):
            continue
        j = json.load(open(p))
        f32 = f32 or j
        agg = j["aggregate_decode_tps"]
        keys = sorted(agg, key=int)[-2:]
        aggs = " / ".join(f"{agg[k]:.0f} ({100 * agg[k] / f32['aggregate_decode_tps'][k]:.0f}%)" for k in keys)
        rows.append(f"| ~{shape.upper()} | {t.upper()} ({j['weights_held_as']}) | {j['weight_bytes_per_step'] / 1e6:.0f} + {j['kv_bytes_per_step'] / 1e6:.1f} | "
                    f"{j['prompt_tps']:.0f} ({100 * j['prompt_tps'] / f32['prompt_tps']:.0f}%) | "
                    f"{j['decode1_tps']:.1f} ({100 * j['decode1_share_read']:.0f}% / {100 * j['decode1_share_read_far']:.0f}%; "
                    f"{100 * max(r['steal'] for r in j['decode1_runs'] if r.get('counted', True)):.0f}%) | {aggs} |")
open(os.path.join(out, "weights.md"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
