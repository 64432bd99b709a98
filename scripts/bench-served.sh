#!/usr/bin/env bash
# Served throughput: 16 concurrent streamed /v1/completions (280-token prompts, 128 greedy tokens
# out, 32 requests) on the ~110M synthetic Q4_K_M, f16 KV cache, client-timed by
# scripts/bench_served.py: output tokens per second, TTFT and TPOT p50, and how busy the engine
# was kept (kvserve:engine_busy_seconds_total over wall time). With LLAMA_CPP_BIN (a directory
# holding llama-server, built outside the project), llama-server b10472 on the same file and
# load (16 slots, flash attention as it defaults), alternating. Writes bench-results/served.md.
# Usage: [LLAMA_CPP_BIN=DIR] scripts/bench-served.sh [--quick]  (--quick: one round)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="${KVSERVE_BENCH_DIR:-$root/bench-results}"
rounds=2; [ "${1:-}" = --quick ] && rounds=1
mkdir -p "$out"
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
cmake --build "$build" -j "$(nproc)" --target kvserve kvserve-mkmodel kvserve-quantize > /dev/null
. "$root/scripts/bench-common.sh"
synthetic=$(synthetic_model 768 12 12 2048)
file="${synthetic%-f32.gguf}-Q4_K_M.gguf"
[ -f "$file" ] || "$build/engine/kvserve-quantize" "$synthetic" "$file" Q4_K_M > /dev/null
prompt=280 gen=128 streams=16 requests=32
start_server served "$file" --set 'cache.dtype="f16"' --set cache.memory_bytes='"2GiB"'
servers=("kvserve=http://$http")
if [ -n "${LLAMA_CPP_BIN:-}" ]; then
  port=$((22000 + RANDOM % 4000))
  "$LLAMA_CPP_BIN/llama-server" -m "$file" -t "$(nproc)" -c $((streams * (prompt + gen + 64))) -np "$streams" \
    --host 127.0.0.1 --port "$port" > "$out/llama-server-served.log" 2>&1 &
  llama_pid=$!
  trap 'kill -TERM "$server_pid" "$llama_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$port/health" > /dev/null && break; sleep 0.2; done
  servers+=("llama-server=http://127.0.0.1:$port")
fi
/usr/bin/python3 "$root/scripts/bench_served.py" "$prompt" "$gen" "$streams" "$requests" "$rounds" "${servers[@]}" \
  | tee "$out/served.md"
