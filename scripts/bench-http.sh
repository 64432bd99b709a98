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
model="$build/models/bench-d768-l12-h12-kv12-f2048-v32000-f32.gguf"
[ -f "$model" ] || "$build/engine/kvserve-mkmodel" --out "$model" --dim 768 --layers 12 --heads 12 --kv-heads 12 \
  --ffn 2048 --vocab 32000 --context 2048 > /dev/null
rm -f "$out/http-port" "$out/http-port.http"
"$build/server/kvserve" --model "$model" --listen 127.0.0.1:0 --port-file "$out/http-port" \
  --set cache.memory_bytes='"2GiB"' --set scheduler.max_num_batched_tokens=512 --set server.metrics_listen='""' \
  --set server.http_listen='"127.0.0.1:0"' --set 'server.log_level="warn"' > "$out/server-http.log" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 1200); do [ -f "$out/http-port.http" ] && break; sleep 0.1; done
grpc="127.0.0.1:$(cat "$out/http-port")" http="127.0.0.1:$(cat "$out/http-port.http")"
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
