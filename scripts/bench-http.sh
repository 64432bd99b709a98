#!/usr/bin/env bash
# gRPC against the OpenAI-compatible HTTP API on the same server and workload, in one run:
# kvserve-bench --addr (gRPC) and --http (POST /v1/completions, streamed), alternating, at
# concurrency 1, 4 and 16 (128-token prompts, 128 out, greedy), on the ~110M synthetic shape.
# Writes bench-results/http.md. Usage: scripts/bench-http.sh [--quick]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="$root/bench-results"
quick=0; [ "${1:-}" = --quick ] && quick=1
mkdir -p "$out"
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
cmake --build "$build" -j "$(nproc)" --target kvserve kvserve-bench kvserve-mkmodel > /dev/null
. "$root/scripts/bench-common.sh"
start_server http "$(synthetic_model 768 12 12 2048)" --set cache.memory_bytes='"2GiB"' \
  --set scheduler.max_num_batched_tokens=512
rounds=2; [ "$quick" = 1 ] && rounds=1
for round in $(seq "$rounds"); do
  for c in 1 4 16; do
    n=$(( c == 1 ? 8 : c * 2 ))
    for api in grpc http; do
      extra=(); [ "$api" = http ] && extra=(--http "$http")
      "$build/clients/kvserve-bench" --addr "$grpc" "${extra[@]}" --quiet --num-requests "$n" --concurrency "$c" \
        --prompt-len 128 --output-len 128 --json "$out/http-$api-c$c-r$round.json" > /dev/null
    done
  done
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = ["| ~110M, 128-token prompts, 128 out | gRPC output tok/s | HTTP output tok/s | HTTP / gRPC | gRPC TTFT / TPOT | HTTP TTFT / TPOT |",
        "|---|---|---|---|---|---|"]
for c in (1, 4, 16):
    def mean(api, key, sub=None):
        vals = []
        for r in range(1, rounds + 1):
            j = json.load(open(f"{out}/http-{api}-c{c}-r{r}.json"))
            vals.append(j[key][sub] if sub else j[key])
        return sum(vals) / len(vals)
    g, h = mean("grpc", "output_throughput"), mean("http", "output_throughput")
    rows.append(f"| {c} stream{'s' if c > 1 else ''} | {g:.1f} | {h:.1f} | {100 * h / g:.0f}% | "
                f"{mean('grpc', 'ttft', 'mean_ms') / 1e3:.2f} s / {mean('grpc', 'tpot', 'mean_ms'):.1f} ms | "
                f"{mean('http', 'ttft', 'mean_ms') / 1e3:.2f} s / {mean('http', 'tpot', 'mean_ms'):.1f} ms |")
text = "\n".join(rows) + f"\n\n(means of {rounds} alternating rounds, one server)\n"
open(f"{out}/http.md", "w").write(text)
print(text)
PY
