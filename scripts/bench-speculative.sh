#!/usr/bin/env bash
# Speculative decoding: kvserve-bench-speculative's verification cost (a pass over 1+K rows
# against 1, at a 512-token context) on the ~110M synthetic shape; one greedy stream with
# speculative.method "off" against "ngram", alternating, on stories260K (llama2.c's model: real,
# repetitive text) and on the ~110M synthetic shape in F16 (random weights: text that seldom
# repeats); the same F16 stream against a draft model, its own Q8_0 and Q4_0 files; and 16
# concurrent streams with each method against off. Writes bench-results/speculative.md.
# Usage: scripts/bench-speculative.sh [--quick]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="${KVSERVE_BENCH_DIR:-$root/bench-results}"
shared="${KVSERVE_SHARED_DIR:-$root/../shared}"
quick=0; [ "${1:-}" = --quick ] && quick=1
mkdir -p "$out"
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
cmake --build "$build" -j "$(nproc)" --target kvserve-bench-speculative kvserve-mkmodel kvserve-quantize > /dev/null
. "$root/scripts/bench-common.sh"
synthetic=$(synthetic_model 768 12 12 2048)
for t in F16 Q8_0 Q4_0; do
  [ -f "${synthetic%-f32.gguf}-$t.gguf" ] || "$build/engine/kvserve-quantize" "$synthetic" "${synthetic%-f32.gguf}-$t.gguf" "$t" > /dev/null
done
f16="${synthetic%-f32.gguf}-F16.gguf"
reps=30 rounds=3 streams_tokens=64; [ "$quick" = 1 ] && reps=10 rounds=1
bench="$build/engine/kvserve-bench-speculative"
{
  echo "### Verification cost, ~110M synthetic (F32), one sequence"
  "$bench" --model "$synthetic" --part cost --reps "$reps"
  echo
  echo "### One stream, off against each proposer (alternating, $rounds rounds)"
  "$bench" --model "$shared/models/stories260K.gguf" --part stream --tokens 256 --requests 3 --rounds "$rounds"
  "$bench" --model "$f16" --part stream --tokens 256 --requests 2 --rounds "$rounds" | tail -1
  for t in Q8_0 Q4_0; do
    "$bench" --model "$f16" --part stream --tokens 256 --requests 2 --rounds "$rounds" --method draft \
      --draft "${synthetic%-f32.gguf}-$t.gguf" | tail -1
  done
  echo
  echo "### 16 concurrent streams, off against each proposer (alternating, $rounds rounds)"
  "$bench" --model "$f16" --part stream --tokens "$streams_tokens" --requests 1 --rounds "$rounds" --streams 16
  "$bench" --model "$f16" --part stream --tokens "$streams_tokens" --requests 1 --rounds "$rounds" --streams 16 \
    --method draft --draft "${synthetic%-f32.gguf}-Q8_0.gguf" | tail -1
} | tee "$out/speculative.md"

# Beside llama.cpp (LLAMA_CPP_BIN: the directory of a llama-server built outside the project):
# the same F16 file over /v1/completions, one stream, client-timed, alternating, each server
# with speculation off, prompt lookup, and the Q8_0 file as its draft.
if [ -n "${LLAMA_CPP_BIN:-}" ]; then
  prompt="$out/speculative-prompt.txt"
  printf 'Once upon a time' > "$prompt"
  pids=()
  trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' EXIT
  threads=$(nproc)
  declare -A urls
  base_port=$((21000 + RANDOM % 4000))
  i=0
  for mode in off ngram draft; do
    case $mode in
      off) kv=(); ll=() ;;
      ngram) kv=(--set 'speculative.method="ngram"'); ll=(--spec-type ngram-simple) ;;
      draft) kv=(--set 'speculative.method="draft"' --set "speculative.draft_model=\"${synthetic%-f32.gguf}-Q8_0.gguf\"")
             ll=(-md "${synthetic%-f32.gguf}-Q8_0.gguf" --spec-draft-n-max 4) ;;
    esac
    start_server "spec-$mode" "$f16" "${kv[@]}"
    pids+=("$server_pid")
    urls[kvserve-$mode]="http://$http"
    port=$((base_port + i)); i=$((i + 1))
    "$LLAMA_CPP_BIN/llama-server" -m "$f16" -t "$threads" -c 2048 -np 1 --host 127.0.0.1 --port "$port" "${ll[@]}" \
      > "$out/llama-server-$mode.log" 2>&1 &
    pids+=("$!")
    urls[llama-$mode]="http://127.0.0.1:$port"
  done
  trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' EXIT
  for mode in off ngram draft; do
    for _ in $(seq 600); do curl -sf "${urls[llama-$mode]}/health" > /dev/null && break; sleep 0.2; done
  done
  {
    echo
    echo "### One stream over HTTP beside $LLAMA_CPP_BIN/llama-server ($("$LLAMA_CPP_BIN/llama-server" --version 2>&1 | grep -o 'version: .*' | head -1)), F16 ~110M, draft its Q8_0"
    /usr/bin/python3 "$root/scripts/bench_one_stream.py" "$prompt" 256 "$((rounds * 2 + 1))" \
      "llama-off=${urls[llama-off]}" "kvserve-off=${urls[kvserve-off]}" "llama-ngram=${urls[llama-ngram]}" \
      "kvserve-ngram=${urls[kvserve-ngram]}" "llama-draft=${urls[llama-draft]}" "kvserve-draft=${urls[kvserve-draft]}"
  } | tee -a "$out/speculative.md"
fi
