#!/usr/bin/env bash
# Speculative decoding, in four parts (writes bench-results/speculative.md):
#  1. kvserve-bench-speculative's verification cost (a pass over 1+K rows against 1, at a
#     512-token context) on the ~110M synthetic shape.
#  2. The rewrite workload: a copier (kvserve-mkmodel --copier: weights that copy the context, as
#     a model rewriting a document does) of the ~110M shape with 128-wide heads, in F16, on
#     scripts/data/rewrite-prompt.txt; one greedy stream with speculative.method "off" against
#     "ngram" and against "draft" with the copier's own Q4_0 and Q8_0 files; 16 streams, ngram
#     against off; without --quick, also a ~1B copier against its Q4_0 as draft and with ngram.
#  3. Free text, where prompt lookup finds less: stories260K (llama2.c's model) and the ~110M
#     synthetic shape in F16 (random weights), off against ngram and against its own Q8_0 and Q4_0
#     as drafts; 16 streams with each method against off.
#  4. With LLAMA_CPP_BIN (the directory of a llama-server built outside the project): kvserve
#     beside llama-server on the same files over /v1/completions, one stream, client-timed,
#     alternating, each with speculation off, with prompt lookup (llama.cpp: ngram-simple) and
#     with the Q4_0 file as draft (llama.cpp: draft-simple), on the rewrite workload and on free
#     text.
# K/V in f16 throughout (llama.cpp's default). Usage: scripts/bench-speculative.sh [--quick]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"
out="${KVSERVE_BENCH_DIR:-$root/bench-results}"
shared="${KVSERVE_SHARED_DIR:-$root/../shared}"
quick=0; [ "${1:-}" = --quick ] && quick=1
mkdir -p "$out"
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
cmake --build "$build" -j "$(nproc)" --target kvserve kvserve-bench-speculative kvserve-mkmodel kvserve-quantize > /dev/null
. "$root/scripts/bench-common.sh"
synthetic=$(synthetic_model 768 12 12 2048)
copier="$build/models/copier-d768-l12-h6-f2048-v32000-f32.gguf"
[ -f "$copier" ] || "$build/engine/kvserve-mkmodel" --out "$copier" --copier --dim 768 --layers 12 --heads 6 --kv-heads 6 \
  --ffn 2048 --vocab 32000 --vocab-from "$shared/models/ggml-vocab-llama-spm.gguf" --context 2048 > /dev/null
for m in "$synthetic" "$copier"; do
  for t in F16 Q8_0 Q4_0; do
    [ -f "${m%-f32.gguf}-$t.gguf" ] || "$build/engine/kvserve-quantize" "$m" "${m%-f32.gguf}-$t.gguf" "$t" > /dev/null
  done
done
f16="${synthetic%-f32.gguf}-F16.gguf"
cf16="${copier%-f32.gguf}-F16.gguf"
rewrite="$root/scripts/data/rewrite-prompt.txt"
reps=30 rounds=3 streams_tokens=64; [ "$quick" = 1 ] && reps=10 rounds=1
bench="$build/engine/kvserve-bench-speculative"
stream=(--part stream --kv-dtype f16 --rounds "$rounds")
{
  echo "### Verification cost, ~110M synthetic (F32), one sequence"
  "$bench" --model "$synthetic" --part cost --reps "$reps"
  echo
  echo "### The rewrite workload: one stream on the ~110M copier, F16 (alternating, $rounds rounds)"
  "$bench" --model "$cf16" "${stream[@]}" --prompt-file "$rewrite" --tokens 256 --requests 2 --num-tokens 16
  for t in Q4_0 Q8_0; do
    "$bench" --model "$cf16" "${stream[@]}" --prompt-file "$rewrite" --tokens 256 --requests 2 --method draft \
      --draft "${copier%-f32.gguf}-$t.gguf" | tail -1
  done
  "$bench" --model "$cf16" "${stream[@]}" --prompt-file "$rewrite" --tokens "$streams_tokens" --requests 1 --streams 16 \
    --num-tokens 16 | tail -1
  if [ "$quick" = 0 ]; then
    # The same at ~1B (2048 wide, 16 layers, 16 heads of 128), where a draft pass weighs less
    # beside a pass of the model: its F16 against its own Q4_0 as the draft.
    big="$build/models/copier-d2048-l16-h16-f5632-v32000"
    if [ ! -f "$big-F16.gguf" ] || [ ! -f "$big-Q4_0.gguf" ]; then
      "$build/engine/kvserve-mkmodel" --out "$big-f32.gguf" --copier --dim 2048 --layers 16 --heads 16 --kv-heads 16 \
        --ffn 5632 --vocab 32000 --vocab-from "$shared/models/ggml-vocab-llama-spm.gguf" --context 2048 > /dev/null
      for t in F16 Q4_0; do "$build/engine/kvserve-quantize" "$big-f32.gguf" "$big-$t.gguf" "$t" > /dev/null; done
      rm -f "$big-f32.gguf"
    fi
    "$bench" --model "$big-F16.gguf" --part stream --kv-dtype f16 --rounds 2 --prompt-file "$rewrite" --tokens 256 \
      --requests 1 --method draft --draft "$big-Q4_0.gguf" | tail -1
    "$bench" --model "$big-F16.gguf" --part stream --kv-dtype f16 --rounds 2 --prompt-file "$rewrite" --tokens 256 \
      --requests 1 --num-tokens 16 | tail -1
  fi
  echo
  echo "### Free text: one stream, off against each proposer (alternating, $rounds rounds)"
  "$bench" --model "$shared/models/stories260K.gguf" "${stream[@]}" --tokens 256 --requests 3
  "$bench" --model "$f16" "${stream[@]}" --tokens 256 --requests 2 | tail -1
  for t in Q8_0 Q4_0; do
    "$bench" --model "$f16" "${stream[@]}" --tokens 256 --requests 2 --method draft --draft "${synthetic%-f32.gguf}-$t.gguf" |
      tail -1
  done
  echo
  echo "### Free text: 16 concurrent streams, off against each proposer (alternating, $rounds rounds)"
  "$bench" --model "$f16" "${stream[@]}" --tokens "$streams_tokens" --requests 1 --streams 16
  "$bench" --model "$f16" "${stream[@]}" --tokens "$streams_tokens" --requests 1 --streams 16 \
    --method draft --draft "${synthetic%-f32.gguf}-Q8_0.gguf" | tail -1
} | tee "$out/speculative.md"

[ -n "${LLAMA_CPP_BIN:-}" ] || exit 0

# beside_llama TITLE MODEL DRAFT PROMPT_FILE NGRAM_K: kvserve and llama-server on MODEL, each off,
# with prompt lookup and with DRAFT, over /v1/completions, 256 greedy tokens after PROMPT_FILE's
# text, one stream, client-timed, alternating; kvserve's prompt lookup proposes up to NGRAM_K.
pids=()
trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' EXIT
beside_llama() {
  local title=$1 model=$2 draft=$3 prompt=$4 ngram_k=$5 mode port kv ll
  local -A urls
  local base_port=$((21000 + RANDOM % 4000)) i=0
  for mode in off ngram draft; do
    case $mode in
      off) kv=(); ll=() ;;
      ngram) kv=(--set 'speculative.method="ngram"' --set "speculative.num_tokens=$ngram_k"); ll=(--spec-type ngram-simple) ;;
      draft) kv=(--set 'speculative.method="draft"' --set "speculative.draft_model=\"$draft\"")
             ll=(--spec-type draft-simple -md "$draft" --spec-draft-n-max 4) ;;
    esac
    start_server "spec-$mode" "$model" --set 'cache.dtype="f16"' "${kv[@]}"
    pids+=("$server_pid")
    urls[kvserve-$mode]="http://$http"
    port=$((base_port + i)); i=$((i + 1))
    "$LLAMA_CPP_BIN/llama-server" -m "$model" -t "$(nproc)" -c 2048 -np 1 --host 127.0.0.1 --port "$port" "${ll[@]}" \
      > "$out/llama-server-$mode.log" 2>&1 &
    pids+=("$!")
    urls[llama-$mode]="http://127.0.0.1:$port"
  done
  trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' EXIT
  for mode in off ngram draft; do
    for _ in $(seq 600); do curl -sf "${urls[llama-$mode]}/health" > /dev/null && break; sleep 0.2; done
  done
  echo
  echo "### $title"
  /usr/bin/python3 "$root/scripts/bench_one_stream.py" "$prompt" 256 "$((rounds * 2 + 1))" \
    "llama-off=${urls[llama-off]}" "kvserve-off=${urls[kvserve-off]}" "llama-ngram=${urls[llama-ngram]}" \
    "kvserve-ngram=${urls[kvserve-ngram]}" "llama-draft=${urls[llama-draft]}" "kvserve-draft=${urls[kvserve-draft]}"
  for mode in off ngram draft; do
    echo "llama.cpp $mode: $(grep -o 'draft acceptance = .*' "$out/llama-server-$mode.log" | tail -1)"
  done
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
}
version=$("$LLAMA_CPP_BIN/llama-server" --version 2>&1 | grep -o 'version: .*' | head -1)
free_prompt="$out/speculative-prompt.txt"
printf 'Once upon a time' > "$free_prompt"
{
  beside_llama "Rewrite workload beside $LLAMA_CPP_BIN/llama-server ($version): the ~110M copier, F16, draft its Q4_0" \
    "$cf16" "${copier%-f32.gguf}-Q4_0.gguf" "$rewrite" 16
  beside_llama "Free text beside llama-server: the ~110M random-weight F16, draft its Q4_0" \
    "$f16" "${synthetic%-f32.gguf}-Q4_0.gguf" "$free_prompt" 4
} | tee -a "$out/speculative.md"
