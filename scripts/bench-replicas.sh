#!/usr/bin/env bash
# Replicas behind a load balancer on this machine (scripts/replicas.sh: HAProxy in front of 3
# kvserve replicas on the ~15M synthetic shape, one compute thread each, a cache that holds
# about a third of the workload's system prompts): the multi-tenant chat workload
# (scripts/bench_replicas.py: 12 system prompts of 512 tokens shared by 240 conversations with
# their own short messages) in round-robin mode and in both prefix-affinity modes (placement with
# a stick table, consistent hashing), same run: throughput, TTFT p50/p90 and prefix-cache hit
# rate per mode, and the ratios to round robin. Then faults under that load in prefix mode: one
# replica SIGKILLed and restarted, another SIGTERMed.
# Writes bench-results/replicas.md. Usage: scripts/bench-replicas.sh [--quick]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="$root/bench-results"
quick=0; [ "${1:-}" = --quick ] && quick=1
mkdir -p "$out"
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
cmake --build "$build" -j "$(nproc)" --target kvserve kvserve-mkmodel > /dev/null
. "$root/scripts/bench-common.sh"
model=$(synthetic_model 288 6 6 768)
requests=480; [ "$quick" = 1 ] && requests=240
server_args=(--set model.num_threads=1 --set cache.block_size=16 --set cache.num_blocks=200
             --set scheduler.max_num_seqs=8 --set server.shutdown_grace_ms=30000)
base=18100 port=8100
rp=""
trap '[ -n "$rp" ] && kill -TERM "$rp" 2>/dev/null; wait 2>/dev/null || true' EXIT
run_mode() {  # run_mode MODE OUTFILE DRIVER-ARGS...
  local mode=$1 file=$2; shift 2
  local dir="/tmp/kvserve-replicas-$mode"
  rm -rf "$dir"
  "$root/scripts/replicas.sh" --model "$model" --replicas 3 --mode "$mode" --port "$port" --base-port "$base" --balance-factor 200 \
    --dir "$dir" -- "${server_args[@]}" > "$out/replicas-$mode.log" 2>&1 &
  rp=$!
  for _ in $(seq 600); do [ -f "$dir/ready" ] && break; sleep 0.1; done
  [ -f "$dir/ready" ] || { cat "$out/replicas-$mode.log"; kill "$rp"; exit 1; }
  /usr/bin/python3 "$root/scripts/bench_replicas.py" "http://127.0.0.1:$port" "$@" > "$file"
  kill -TERM "$rp"; wait "$rp" 2>/dev/null || true
  rp=""
}
run_mode roundrobin "$out/replicas-roundrobin.json" --requests "$requests" --concurrency 6 --prefixes 12 --prefix-len 512
run_mode prefix "$out/replicas-prefix.json" --requests "$requests" --concurrency 6 --prefixes 12 --prefix-len 512
run_mode hash "$out/replicas-hash.json" --requests "$requests" --concurrency 6 --prefixes 12 --prefix-len 512
# Long enough (128-token answers) that the faults at 2, 4 and 7 s fall inside the load.
run_mode prefix "$out/replicas-faults.json" --requests 240 --concurrency 6 --prefixes 12 --prefix-len 512 --output-len 128 \
  --faults /tmp/kvserve-replicas-prefix --base-port "$base" --server "$build/server/kvserve" --model "$model" \
  --listen "127.0.0.1:{grpc}" --set 'server.http_listen="127.0.0.1:{http}"' --set 'server.metrics_listen=""' \
  --set 'server.log_level="warn"' "${server_args[@]}"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rr, px, hs, f = (json.load(open(f"{out}/replicas-{m}.json")) for m in ("roundrobin", "prefix", "hash", "faults"))
rows = ["| 3 replicas, 12 shared system prompts | output tok/s | TTFT p50 ms | TTFT p90 ms | prefix-cache hit rate | requests per replica |",
        "|---|---|---|---|---|---|"]
for name, r in (("round robin", rr), ("prefix affinity (placement)", px), ("prefix affinity (hashing)", hs)):
    rows.append(f"| {name} | {r['output_tok_s']:.1f} | {r['ttft_p50_ms']:.0f} | {r['ttft_p90_ms']:.0f} | "
                f"{100 * r['hit_rate']:.0f}% | {' / '.join(str(v) for v in r['by_replica'].values())} |")
for name, r in (("placement / round robin", px), ("hashing / round robin", hs)):
    rows.append(f"| {name} | {r['output_tok_s'] / rr['output_tok_s']:.2f}x | "
                f"{rr['ttft_p50_ms'] / r['ttft_p50_ms']:.2f}x better | {rr['ttft_p90_ms'] / r['ttft_p90_ms']:.2f}x better | "
                f"{r['hit_rate'] / max(rr['hit_rate'], 1e-9):.2f}x | |")
text = "\n".join(rows) + "\n\n"
text += (f"Faults (prefix affinity, {f['requests']} requests of 128 tokens): replica r1 SIGKILLed at 2 s and restarted at 4 s, "
         f"r2 SIGTERMed at 7 s. Completed {f['completed']}; cut by the kill {f['cut_by_kill']} (the client saw "
         f"{', '.join(f['cut_errors']) or 'no error'}); lost {f['lost']}; streams running on the drained replica "
         f"{f['running_on_drained_replica']}, of which completed {f['completed_on_drained_replica']}; "
         f"served by r1 after its restart {f['served_by_restarted_replica_after_restart']}.\n")
open(f"{out}/replicas.md", "w").write(text)
print(text)
PY
