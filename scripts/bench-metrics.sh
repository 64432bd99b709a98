#!/usr/bin/env bash
# How long a Prometheus scrape of /metrics takes on the HTTP port (where the inference gateway's
# endpoint picker scrapes, every 50 ms) when the server is idle and under full load (16 streams
# on the ~110M synthetic shape, more requests than run at once), scraping 20 times a second;
# reports p50/p99/max per state and the loaded p99 against the protocol's 10 ms budget.
# Writes bench-results/metrics.md. Usage: scripts/bench-metrics.sh [--quick]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="$root/bench-results"
quick=0; [ "${1:-}" = --quick ] && quick=1
mkdir -p "$out"
cmake --build "$build" -j "$(nproc)" --target kvserve kvserve-bench kvserve-mkmodel > /dev/null
. "$root/scripts/bench-common.sh"
start_server metrics "$(synthetic_model 768 12 12 2048)" --set cache.memory_bytes='"2GiB"' \
  --set scheduler.max_num_seqs=12
url="http://$http/metrics"
scrape() {  # scrape N FILE: N scrapes 50 ms apart, each one's seconds in FILE
  : > "$2"
  for _ in $(seq "$1"); do
    curl -s -o /dev/null -w "%{time_total}\n" "$url" >> "$2"
    sleep 0.05
  done
}
n=$([ "$quick" = 1 ] && echo 100 || echo 400)
scrape "$n" "$out/metrics-idle.txt"
"$build/clients/kvserve-bench" --addr "$grpc" --quiet --num-requests 200 --concurrency 16 --prompt-len 128 \
  --output-len 512 > "$out/metrics-load.log" 2>&1 &
load=$!
sleep 2   # the batch is full
scrape "$n" "$out/metrics-loaded.txt"
running=$(curl -s "$url" | sed -n 's/^vllm:num_requests_running \(.*\)/\1/p')
kill "$load" 2>/dev/null || true
wait "$load" 2>/dev/null || true
/usr/bin/python3 - "$out" "$running" <<'PY'
import sys
out, running = sys.argv[1], sys.argv[2]
def stats(name):
    v = sorted(float(x) * 1e3 for x in open(f"{out}/metrics-{name}.txt") if x.strip())
    return v[len(v) // 2], v[min(len(v) - 1, int(len(v) * 0.99))], v[-1], len(v)
rows = ["| state | scrapes | p50 ms | p99 ms | max ms | p99 / 10 ms budget |", "|---|---|---|---|---|---|"]
for name, label in (("idle", "idle"), ("loaded", f"16 streams, {running} running at the end")):
    p50, p99, mx, n = stats(name)
    rows.append(f"| {label} | {n} | {p50:.2f} | {p99:.2f} | {mx:.2f} | {p99 / 10:.2f} |")
text = "\n".join(rows) + "\n\n(curl's time_total per scrape of the HTTP port's /metrics, 20 a second)\n"
open(f"{out}/metrics.md", "w").write(text)
print(text)
PY
