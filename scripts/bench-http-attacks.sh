#!/usr/bin/env bash
# Availability of the HTTP API under connection attacks (clients/python/bench_http_attacks.py):
# /health latency p50/p99 from 127.0.0.2 while 127.0.0.1 half-closes 1,030 connections, holds
# 1,030 slowloris connections, or posts 4 MB prompts, against a no-attack baseline in the same
# run. Serves stories260K (../shared) or the synthetic default model. Writes
# bench-results/http-attacks.{md,json}. Usage: scripts/bench-http-attacks.sh [--seconds N] [--server BIN]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="$root/bench-results"
seconds=20 server=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --server) server="$2"; shift 2 ;;  # another kvserve binary (an older build, for a before/after)
    *) echo "bench-http-attacks.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
mkdir -p "$out"
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
# 1,030 attack sockets and the probes: more descriptors than the default 1,024, on both sides.
ulimit -n 8192
if [ -z "$server" ]; then
  cmake --build "$build" -j "$(nproc)" --target kvserve kvserve-mkmodel > /dev/null
  server="$build/server/kvserve"
fi
model="$root/../shared/models/stories260K.gguf"
if [ ! -f "$model" ]; then
  model="$build/models/attack-d64-l2.gguf"
  [ -f "$model" ] || "$build/engine/kvserve-mkmodel" --out "$model" --dim 64 --layers 2 --heads 4 --kv-heads 4 \
    --ffn 172 --vocab 512 > /dev/null
fi
# A fresh server for each attack (with a baseline of its own), so that what one attack leaves
# behind (an old build's CLOSE-WAIT sockets held for 300 s) does not count against the next.
header=""
: > "$out/http-attacks.md"
for attack in half-close slowloris big-prompt; do
  rm -f "$out/attack-port" "$out/attack-port.http"
  "$server" --model "$model" --listen 127.0.0.1:0 --port-file "$out/attack-port" --set server.metrics_listen='""' \
    --set server.http_listen='"127.0.0.1:0"' --set 'server.log_level="warn"' > "$out/server-attacks-$attack.log" 2>&1 &
  pid=$!
  trap 'kill -KILL "$pid" 2>/dev/null || true' EXIT
  for _ in $(seq 600); do [ -f "$out/attack-port.http" ] && break; sleep 0.1; done
  port="$(cat "$out/attack-port.http")"
  /usr/bin/python3 "$root/clients/python/bench_http_attacks.py" --port "$port" --seconds "$seconds" \
    --attacks "baseline,$attack" $header --json "$out/http-attacks-$attack.json" | tee -a "$out/http-attacks.md"
  header="--no-header"
  kill -0 "$pid" 2>/dev/null && echo "(server alive after $attack)" || echo "(the server died during $attack)"
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
done
