#!/usr/bin/env bash
# Runs kvserve's benchmarks and writes bench-results/results.md (a table) and *.json.
#   engine: kvserve-bench-engine on the ~15M, ~110M and ~1B synthetic shapes (F32), with the
#           machine's bandwidth and FMA peak measured in the same run
#   weights: scripts/bench-weights.sh, the same shapes in F16 and the quantized presets
#   serving: kvserve-bench over gRPC against a fresh server on the ~110M shape, and over the
#   HTTP API beside gRPC (scripts/bench-http.sh)
#   moe: a Qwen3-30B-A3B-like mixture of experts scaled to this machine (Q4_K_M, 1.8 GB)
#   grammar: scripts/bench-grammar.sh, constrained decoding's mask time and throughput
#   metrics: scripts/bench-metrics.sh, a /metrics scrape's latency idle and under full load
#   speculative: scripts/bench-speculative.sh, verification cost, one stream with prompt lookup and a draft model, 16 streams
#   vs llama.cpp: with LLAMA_CPP_BIN set (llama-bench, llama-batched-bench and llama-server built
#           outside the project), scripts/bench-vs-llamacpp.sh, bench-speculative.sh's HTTP rows
#           and bench-served.sh
# --quick skips the ~1B and MoE shapes (4 GB and 1.8 GB models) and shortens the serving runs.
# KVSERVE_KV_DTYPE=f32|f16 (default f16, llama.cpp's default cache type, which its published
# figures used) sets the KV cache element type of every run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="${KVSERVE_BENCH_DIR:-$root/bench-results}"
quick=0
[ "${1:-}" = "--quick" ] && quick=1

"$root/scripts/deps.sh"
# The spin count serve.sh and the image use (see serve.sh).
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)" --target kvserve kvserve-bench kvserve-bench-engine kvserve-mkmodel kvserve-bench-quant
mkdir -p "$out" "$build/models"
kv_dtype="${KVSERVE_KV_DTYPE:-f16}"
bench_engine=("$build/engine/kvserve-bench-engine" --kv-dtype "$kv_dtype")

"${bench_engine[@]}" --models-dir "$build/models" --dim 288 --layers 6 --heads 6 --kv-heads 6 --ffn 768 \
  --vocab 32000 --json "$out/engine-15m.json" | tee "$out/engine-15m.txt"
# The serving c16 workload in process too, so the table can say what the gRPC path costs.
n=64; [ "$quick" = 1 ] && n=16
"${bench_engine[@]}" --models-dir "$build/models" --dim 768 --layers 12 --heads 12 --kv-heads 12 --ffn 2048 \
  --vocab 32000 --closed-loop-requests "$n" --closed-loop-concurrency 16 --json "$out/engine-110m.json" \
  | tee "$out/engine-110m.txt"
if [ "$quick" = 0 ]; then
  "${bench_engine[@]}" --models-dir "$build/models" --dim 2048 --layers 16 --heads 16 --kv-heads 16 --ffn 5632 \
    --vocab 32000 --batches 1,4 --gen 32 --json "$out/engine-1b.json" | tee "$out/engine-1b.txt"
  # A mixture of experts shaped like Qwen3-30B-A3B, scaled to this machine: 2048 wide, 24 layers,
  # GQA 32/4 with 128-wide heads, 32 experts of width 512, 8 used (3.0B parameters, ~1.1B a
  # token), Q4_K_M; the bandwidth limit counts the bytes a step streams (attention, router, the
  # used experts, output).
  "${bench_engine[@]}" --models-dir "$build/models" --arch qwen3moe --dim 2048 --layers 24 --heads 32 --kv-heads 4 \
    --head-dim 128 --ffn 6144 --experts 32 --experts-used 8 --expert-ffn 512 --vocab 32000 --dtype Q4_K_M \
    --batches 1,16,64 --gen 64 --batch-gen 32 --json "$out/engine-moe.json" | tee "$out/engine-moe.txt"
fi

# Weight types: F32 against F16 and the quantized presets, on the same shapes.
"$root/scripts/bench-weights.sh" $([ "$quick" = 1 ] && echo --quick)

# Constrained decoding on a 152k-token vocabulary: mask time per token, throughput with a schema.
"$root/scripts/bench-grammar.sh"

# Serving: a fresh server per load, as llama-server was measured.
serve_and_bench() {  # name, prefix caching (true/false), then kvserve-bench arguments
  local name="$1" caching="$2"; shift 2
  rm -f "$out/port"
  "$build/server/kvserve" --model "$build/models/bench-d768-l12-h12-kv12-f2048-v32000-f32.gguf" \
    --listen 127.0.0.1:0 --port-file "$out/port" --set cache.memory_bytes=2147483648 \
    --set cache.enable_prefix_caching="$caching" --set cache.dtype="\"$kv_dtype\"" \
    --set scheduler.max_num_batched_tokens=512 --set 'server.log_level="warn"' --set 'server.http_listen="127.0.0.1:0"' \
    > "$out/server-$name.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1200); do [ -f "$out/port" ] && break; sleep 0.1; done
  "$build/clients/kvserve-bench" --addr "127.0.0.1:$(cat "$out/port")" --json "$out/serving-$name.json" "$@" \
    | tee "$out/serving-$name.txt"
  kill -TERM "$pid"; wait "$pid" || true
}
serve_and_bench c1 true --num-requests 8 --concurrency 1 --prompt-len 128 --output-len 128
serve_and_bench c4 true --num-requests "$n" --concurrency 4 --prompt-len 128 --output-len 128
serve_and_bench c16 true --num-requests "$n" --concurrency 16 --prompt-len 128 --output-len 128
serve_and_bench c16-p512 true --num-requests "$n" --concurrency 16 --prompt-len 512 --output-len 128
# The HTTP API against gRPC on one server, the same workload (bench-results/http.md).
"$root/scripts/bench-http.sh" $([ "$quick" = 1 ] && echo --quick)
# A /metrics scrape idle and under full load (bench-results/metrics.md).
"$root/scripts/bench-metrics.sh" $([ "$quick" = 1 ] && echo --quick)
# Speculative decoding for one stream (bench-results/speculative.md).
"$root/scripts/bench-speculative.sh" $([ "$quick" = 1 ] && echo --quick)
# Beside llama.cpp on the same files, against the honest limits (bench-results/vs-llamacpp.md).
if [ -n "${LLAMA_CPP_BIN:-}" ]; then "$root/scripts/bench-vs-llamacpp.sh" $([ "$quick" = 1 ] && echo --quick); fi
# Long context (16 x 1,536 + 64, f16 and q8_0 KV) against the read roofline of weights + K/V, and
# llama.cpp's flash attention where LLAMA_CPP_BIN is set (bench-results/long-context.md).
"$root/scripts/bench-long-context.sh" $([ "$quick" = 1 ] && echo --quick)
# Served: 16 concurrent OpenAI streams, output tok/s, TTFT, TPOT, engine busy share, beside
# llama-server where LLAMA_CPP_BIN holds it (bench-results/served.md).
"$root/scripts/bench-served.sh" $([ "$quick" = 1 ] && echo --quick)
# Prefix caching: a shared 1,024-token prefix and short distinct suffixes, cache on against off.
serve_and_bench prefix-on true --num-requests 16 --concurrency 4 --shared-prefix-len 1024 --prompt-len 32 --output-len 32
serve_and_bench prefix-off false --num-requests 16 --concurrency 4 --shared-prefix-len 1024 --prompt-len 32 --output-len 32

/usr/bin/python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
rows = ["| shape | prompt tok/s (512) | decode tok/s, 1 seq | % of bandwidth limit | aggregate decode tok/s (seqs: decode-only (whole run, prefill included)) |",
        "|---|---|---|---|---|"]
for name in ("15m", "110m", "1b", "moe"):
    p = os.path.join(out, f"engine-{name}.json")
    if not os.path.exists(p):
        continue
    j = json.load(open(p))
    whole = j.get("aggregate_whole_run_tps", {})
    agg = ", ".join(f"{k}: {v:.0f}" + (f" ({whole[k]:.0f})" if k in whole else "")
                    for k, v in sorted(j["aggregate_decode_tps"].items(), key=lambda kv: int(kv[0])))
    label = "MoE 32x512, 8 used, Q4_K_M" if name == "moe" else f"~{name.upper()}"
    rows.append(f"| {label} ({j['params']/1e6:.0f}M params) | {j['prompt_tps']:.0f} "
                f"({100*j['prompt_tps']/j['compute_limit_tps']:.0f}% of peak) | {j['decode1_tps']:.1f} | "
                f"{100*j.get('decode1_share_read', j['decode1_tps']/j['decode_limit_tps']):.0f}% | {agg} |")
j = json.load(open(os.path.join(out, "engine-110m.json")))
rows.append("")
rows.append(f"Machine: bandwidth {j['bandwidth_gbs']:.1f} GB/s, fp32 FMA peak {j['fma_peak_gflops']:.0f} GFLOP/s; KV cache {j.get('kv_dtype', 'f32')}.")
rows += ["", "| serving (~110M) | output tok/s | TTFT mean / p99 (ms) | TPOT mean / p99 (ms) | E2E p50 (ms) |",
         "|---|---|---|---|---|"]
for name in ("c1", "c4", "c16", "c16-p512", "prefix-on", "prefix-off"):
    s = json.load(open(os.path.join(out, f"serving-{name}.json")))
    label = f"concurrency {s['concurrency']}, prompt {s['prompt_len']}"
    if s.get("shared_prefix_len"):
        label = f"shared {s['shared_prefix_len']}-token prefix + {s['prompt_len']}, caching {name[7:]}"
    rows.append(f"| {label} | {s['output_throughput']:.1f} | "
                f"{s['ttft']['mean_ms']:.0f} / {s['ttft']['p99_ms']:.0f} | {s['tpot']['mean_ms']:.1f} / "
                f"{s['tpot']['p99_ms']:.1f} | {s['e2e']['p50_ms']:.0f} |")
cl = j.get("closed_loop")
c16 = os.path.join(out, "serving-c16.json")
if cl and os.path.exists(c16):
    grpc_tps = json.load(open(c16))["output_throughput"]
    line = (f"Serving c16 over gRPC: {grpc_tps:.1f} output tok/s = {100 * grpc_tps / cl['output_tps']:.0f}% of the "
            f"same workload in process ({cl['output_tps']:.1f})")
    whole, dec = j.get("aggregate_whole_run_tps", {}).get("16"), j["aggregate_decode_tps"].get("16")
    if whole and dec:
        line += (f", {100 * grpc_tps / whole:.0f}% of the engine's aggregate at 16 sequences over the whole run "
                 f"({whole:.1f}, prefill included) and {100 * grpc_tps / dec:.0f}% of its decode-only span "
                 f"({dec:.1f}, no prompt in the timed span)")
    rows += ["", line + "."]
open(os.path.join(out, "results.md"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
PY
