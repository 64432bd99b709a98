#!/usr/bin/env bash
# Does a long-lived kvserve stay as fast as a fresh one? (llama-server does not: after heavy load
# its attention still scans stale cache cells.) One server on the ~110M synthetic shape:
#   1. fresh: the serving c16 workloads (128-token and 512-token prompts, 128 output tokens);
#   2. load for --minutes (default 60): mixed prompt and output lengths, client cancellations,
#      Poisson bursts and shared prefixes that fill the prefix cache, back to back;
#   3. after: the same c16 workloads again (new prompts, so no prefix-cache hits flatter them).
# Writes bench-results/endurance.md and endurance.json: each figure fresh, after, and after/fresh,
# with the server's RSS and engine counters at both points. Keep the machine otherwise quiet during
# steps 1 and 3; only their figures are compared.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="${KVSERVE_BENCH_DIR:-$root/bench-results}/endurance"
minutes=60
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes="$2"; shift 2 ;;
    *) echo "usage: $0 [--minutes N]" >&2; exit 2 ;;
  esac
done

"$root/scripts/deps.sh"
# The spin count serve.sh and the image use (see serve.sh).
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" --target kvserve kvserve-bench kvserve-cli kvserve-mkmodel
mkdir -p "$out" "$build/models"
model="$build/models/bench-d768-l12-h12-kv12-f2048-v32000-f32.gguf"
[ -f "$model" ] || "$build/engine/kvserve-mkmodel" --out "$model" --dim 768 --layers 12 --heads 12 --kv-heads 12 \
  --ffn 2048 --vocab 32000
kv_dtype="${KVSERVE_KV_DTYPE:-f16}"

rm -f "$out/port"
"$build/server/kvserve" --model "$model" --listen 127.0.0.1:0 --port-file "$out/port" \
  --set cache.memory_bytes=2147483648 --set cache.dtype="\"$kv_dtype\"" \
  --set scheduler.max_num_batched_tokens=512 --set 'server.log_level="warn"' --set 'server.http_listen="127.0.0.1:0"' \
  > "$out/server.log" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true' EXIT
for _ in $(seq 1200); do [ -f "$out/port" ] && break; sleep 0.1; done
addr="127.0.0.1:$(cat "$out/port")"
bench=("$build/clients/kvserve-bench" --addr "$addr")

snapshot() {  # phase name: RSS and engine counters
  grep -E '^(VmRSS|VmHWM)' "/proc/$pid/status" > "$out/$1-rss.txt"
  "$build/clients/kvserve-cli" --addr "$addr" stats > "$out/$1-stats.txt"
}
measure() {  # phase name, seed base
  "${bench[@]}" --quiet --seed "$2" --num-requests 64 --concurrency 16 --prompt-len 128 --output-len 128 \
    --json "$out/$1-c16.json" | tee "$out/$1-c16.txt"
  "${bench[@]}" --quiet --seed "$(($2 + 1))" --num-requests 32 --concurrency 16 --prompt-len 512 --output-len 128 \
    --json "$out/$1-c16-p512.json" | tee "$out/$1-c16-p512.txt"
  snapshot "$1"
}

echo "== fresh ($(date -u +%T))"
measure fresh 1
echo "== load for $minutes minutes ($(date -u +%T))"
end=$(( $(date +%s) + 60 * minutes ))
seed=1000 rounds=0 load_requests=0
: > "$out/load.txt"
while [ "$(date +%s)" -lt "$end" ]; do
  case $((rounds % 3)) in
    0) args=(--num-requests 96 --concurrency 24 --prompt-len 400 --prompt-len-range 380 --output-len 120
             --output-len-range 110 --cancel-fraction 0.2) ;;
    1) args=(--num-requests 64 --concurrency 0 --request-rate 4 --prompt-len 200 --prompt-len-range 190
             --output-len 64 --output-len-range 60 --cancel-fraction 0.1) ;;
    2) args=(--num-requests 64 --concurrency 16 --shared-prefix-len 512 --prompt-len 64 --prompt-len-range 60
             --output-len 48 --output-len-range 40) ;;
  esac
  "${bench[@]}" --quiet --seed "$seed" "${args[@]}" --json "$out/load-last.json" >> "$out/load.txt"
  load_requests=$((load_requests + $(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["requests"])' "$out/load-last.json")))
  seed=$((seed + 1)) rounds=$((rounds + 1))
done
echo "$rounds load rounds, $load_requests requests"
echo "== after ($(date -u +%T))"
measure after 101
kill -TERM "$pid"; wait "$pid" || true
trap - EXIT

/usr/bin/python3 - "$out" "$minutes" "$rounds" "$load_requests" <<'PY'
import json, os, sys
out, minutes, rounds, load_requests = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def rss(phase):
    return {l.split(":")[0]: int(l.split()[1]) for l in open(os.path.join(out, f"{phase}-rss.txt"))}
rows = [f"Endurance: one server, {minutes} minutes of load between the two measurements "
        f"({rounds} rounds, {load_requests} requests, 10-20% cancelled by the client).", "",
        "| workload | figure | fresh | after load | after / fresh |", "|---|---|---|---|---|"]
result = {"minutes": float(minutes), "load_rounds": rounds, "load_requests": load_requests}
for w in ("c16", "c16-p512"):
    f, a = (json.load(open(os.path.join(out, f"{p}-{w}.json"))) for p in ("fresh", "after"))
    for name, get in (("output tok/s", lambda j: j["output_throughput"]),
                      ("TTFT mean ms", lambda j: j["ttft"]["mean_ms"]),
                      ("TPOT mean ms", lambda j: j["tpot"]["mean_ms"]),
                      ("E2E p99 ms", lambda j: j["e2e"]["p99_ms"])):
        rows.append(f"| {w} | {name} | {get(f):.1f} | {get(a):.1f} | {get(a) / get(f):.3f} |")
        result.setdefault(w, {})[name] = {"fresh": get(f), "after": get(a)}
rf, ra = rss("fresh"), rss("after")
rows += ["", f"Server RSS: {rf['VmRSS'] / 1024:.1f} MiB fresh, {ra['VmRSS'] / 1024:.1f} MiB after "
             f"(peak {ra['VmHWM'] / 1024:.1f} MiB).", "", "Engine counters after load:", "```",
         open(os.path.join(out, "after-stats.txt")).read().rstrip(), "```"]
result["rss_kib"] = {"fresh": rf, "after": ra}
json.dump(result, open(os.path.join(out, "endurance.json"), "w"), indent=2)
open(os.path.join(out, "endurance.md"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
