#!/usr/bin/env bash
# N kvserve replicas on this machine behind HAProxy (Debian's), which health-checks each
# replica's /ready (unready as soon as it drains) and retries a request that never reached a
# replica (connection refused, a 503 from a draining one) on another. Three modes:
#   roundrobin  requests in turn
#   prefix      prefix affinity by placement: the key is a digest of the request body's first
#               --key-bytes bytes (the model and the prompt's start, where a shared system prompt
#               is); a key's first request goes to the next replica in turn and HAProxy's stick
#               table sends every later one to the same replica, so keys spread evenly (N keys
#               on R replicas: N/R each, where a hash gives some replicas twice the share of
#               others while N is small); a replica that goes away moves only its own keys,
#               each to the replica its next request is sent to; a restarted or added replica
#               takes new keys only (a key idle for --stick-expire moves again)
#   hash        prefix affinity by consistent hashing on the same key, with bounded loads (no
#               replica past --balance-factor percent of the mean of open requests, 150 by
#               default): stateless, and it spreads one very hot prefix, but uneven while the
#               keys are few
# Runs in the foreground until SIGINT or SIGTERM, then stops everything. Files in --dir:
# haproxy.cfg, rK.log, rK.pid (K = 0..N-1), and "ready" once the balancer and every replica are up.
# Usage: scripts/replicas.sh --model PATH [--replicas 3] [--mode prefix] [--port 8100] [--base-port 18100]
#                            [--key-bytes 512] [--balance-factor 150] [--stick-expire 30m]
#                            [--dir /tmp/kvserve-replicas]
#                            [-- SERVER ARGS...]
# Replica K serves gRPC on base-port+2K and HTTP on base-port+2K+1 (scripts/bench-replicas.sh
# restarts one there).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
replicas=3 mode=prefix port=8100 base=18100 key_bytes=512 dir=/tmp/kvserve-replicas model="" balance_factor=150 stick_expire=30m
while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) replicas=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --base-port) base=$2; shift 2 ;;
    --key-bytes) key_bytes=$2; shift 2 ;;
    --balance-factor) balance_factor=$2; shift 2 ;;
    --stick-expire) stick_expire=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "replicas.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$model" ] || { echo "replicas.sh: --model is required" >&2; exit 2; }
case "$mode" in roundrobin) balance="balance roundrobin" ;;
  prefix) balance="balance roundrobin
  # Placement: an unseen key takes the next replica in turn; the table remembers it (20-byte SHA-1
  # of the key; an entry is ~100 bytes, so 100k keys is ~10 MB). A key whose replica is down is
  # sent on by redispatch and the entry follows it.
  stick-table type binary len 20 size 100k expire $stick_expire
  stick on req.body,bytes(0,$key_bytes),sha1" ;;
  hash) balance="balance hash req.body,bytes(0,$key_bytes)
  hash-type consistent
  # Bounded loads: a replica takes a key's requests unless it already has balance-factor
  # percent of the mean of open requests, then the next one on the ring does (a few hot
  # prefixes cannot swamp one).
  hash-balance-factor $balance_factor" ;;
  *) echo "replicas.sh: --mode is roundrobin, prefix or hash" >&2; exit 2 ;;
esac
command -v haproxy > /dev/null || { echo "replicas.sh: haproxy is not installed (scripts/deps.sh --test)" >&2; exit 2; }
mkdir -p "$dir"
rm -f "$dir/ready"
pids=()
stop() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for f in "$dir"/r*.pid; do [ -f "$f" ] && kill -TERM "$(cat "$f")" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop EXIT
trap 'exit 0' INT TERM
servers=""
for k in $(seq 0 $((replicas - 1))); do
  g=$((base + 2 * k)) h=$((base + 2 * k + 1))
  "$build/server/kvserve" --model "$model" --listen "127.0.0.1:$g" --set "server.http_listen=\"127.0.0.1:$h\"" \
    --set 'server.metrics_listen=""' --set 'server.log_level="warn"' "$@" > "$dir/r$k.log" 2>&1 &
  echo $! > "$dir/r$k.pid"
  servers+="  server r$k 127.0.0.1:$h check
"
done
cat > "$dir/haproxy.cfg" <<CFG
global
  maxconn 4096
defaults
  mode http
  # Server-sent events are many small writes: send each at once (without it, HAProxy holds small
  # writes back for more, which added ~40 ms to the time to first token here).
  option http-no-delay
  timeout connect 1s
  timeout client 300s
  timeout server 300s
  timeout http-request 30s
  # A request that never reached a replica (refused connection, a draining replica's 503) goes
  # to another; one a replica began answering is never sent twice.
  retries 3
  option redispatch 1
  retry-on conn-failure empty-response 503
frontend openai
  bind 127.0.0.1:$port
  default_backend kvserve
backend kvserve
  $balance
  option http-buffer-request
  option httpchk GET /ready
  http-check expect status 200
  default-server inter 300ms fall 1 rise 2
  http-response set-header X-Kvserve-Replica %s
$servers
CFG
for k in $(seq 0 $((replicas - 1))); do
  for _ in $(seq 600); do curl -sf "http://127.0.0.1:$((base + 2 * k + 1))/ready" > /dev/null && break; sleep 0.1; done
  curl -sf "http://127.0.0.1:$((base + 2 * k + 1))/ready" > /dev/null || { echo "replica $k did not start:"; cat "$dir/r$k.log"; exit 1; }
done
haproxy -f "$dir/haproxy.cfg" -db > "$dir/haproxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sf --max-time 2 "http://127.0.0.1:$port/ready" > /dev/null || ! kill -0 "${pids[0]}" 2>/dev/null && break
  sleep 0.1
done
# "ready" is written only when the balancer answers (its port may have been taken).
curl -sf --max-time 2 "http://127.0.0.1:$port/ready" > /dev/null || { echo "haproxy did not start:"; cat "$dir/haproxy.log"; exit 1; }
echo "$replicas replicas ($mode) behind http://127.0.0.1:$port" | tee "$dir/ready"
wait "${pids[0]}"
