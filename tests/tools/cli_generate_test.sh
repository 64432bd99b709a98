#!/usr/bin/env bash
# The documentation's promise (docs/operations.md, docs/api.md), run as a person would: kvserve-generate prints exactly the public
# reference continuation; kvserve-tokenize prints the ids; and against a running server,
# kvserve-cli health/generate/info/head-importance work.
# Usage: cli_generate_test.sh BIN_DIR SHARED_MODELS_DIR REQUIRE_SHARED(0|1)
set -euo pipefail
bin="$1"; models="$2"; require="$3"
if [ ! -f "$models/stories260K.gguf" ]; then
  echo "test data $models/stories260K.gguf not found; skipping"
  [ "$require" = 1 ] && exit 1 || exit 77
fi
out=$(mktemp -d)
trap 'kill $(cat "$out/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$out"' EXIT

for n in 200 256; do
  expected="$models/stories260K.expected.txt"
  [ "$n" = 256 ] && expected="$models/stories260K.expected.n256.txt"
  "$bin/engine/kvserve-generate" --model "$models/stories260K.gguf" --prompt "" --max-tokens "$n" \
    --temperature 0 > "$out/gen.txt" 2> "$out/gen.log"
  cmp "$out/gen.txt" "$expected" || { echo "kvserve-generate -n $n differs from $expected"; exit 1; }
done
[ "$("$bin/engine/kvserve-tokenize" --model "$models/stories260K.gguf" "Once upon a time")" = "1 403 407 261 378" ]
[ "$("$bin/engine/kvserve-tokenize" --no-bos --model "$models/stories260K.gguf" "Once upon a time")" = "403 407 261 378" ]

"$bin/server/kvserve" --model "$models/stories260K.gguf" --listen 127.0.0.1:0 --port-file "$out/port" \
  --set cache.num_blocks=256 --set server.http_listen='"127.0.0.1:0"' > "$out/server.log" 2>&1 &
echo $! > "$out/pid"
for _ in $(seq 200); do [ -f "$out/port" ] && break; sleep 0.05; done
addr="127.0.0.1:$(cat "$out/port")"
"$bin/clients/kvserve-cli" --addr "$addr" health | grep -qx SERVING
text=$("$bin/clients/kvserve-cli" --addr "$addr" generate "Once upon a time" --max-tokens 8 --temperature 0)
[ "$text" = ", there was a little girl" ] || { echo "cli generate printed '$text'"; exit 1; }
# Global options after the command; the text ends its line in a file too; an unknown command
# is named; a server address without a port gets 50051, not gRPC's 443.
"$bin/clients/kvserve-cli" generate "Once upon a time" --max-tokens 8 --temperature 0 --addr "$addr" > "$out/nl.txt"
[ "$(cat "$out/nl.txt")" = ", there was a little girl" ] && [ "$(tail -c 1 "$out/nl.txt" | od -An -tx1 | tr -d ' ')" = 0a ] \
  || { echo "generate with --addr after it printed:"; od -c "$out/nl.txt" | tail -3; exit 1; }
! "$bin/clients/kvserve-cli" --addr "$addr" genrate "x" 2> "$out/unknown.txt"
grep -q "^kvserve-cli: unknown command 'genrate' (commands: generate, " "$out/unknown.txt" || { cat "$out/unknown.txt"; exit 1; }
"$bin/clients/kvserve-cli" --addr localhost --timeout 1 health > /dev/null 2> "$out/noport.txt" \
  || grep -q "localhost:50051" "$out/noport.txt" || { cat "$out/noport.txt"; exit 1; }
"$bin/clients/kvserve-cli" --addr "$addr" info | grep -q "KV bytes per token: 2 x 5 layers x 4 KV heads x 8 head dim x 4 bytes = 1280"
grep -q "Maximum concurrency for 2048 tokens per request" "$out/server.log"
# docs/api.md's other client commands: sampling flags, stats, tokenize.
"$bin/clients/kvserve-cli" --addr "$addr" generate "Once upon a time" --max-tokens 64 --temperature 0.8 --top-p 0.95 \
  --seed 7 --stop "." > "$out/sampled.txt"
[ -s "$out/sampled.txt" ] && ! grep -q '\.' "$out/sampled.txt" || { echo "stop string leaked: $(cat "$out/sampled.txt")"; exit 1; }
"$bin/clients/kvserve-cli" --addr "$addr" stats | grep -q "^running 0, waiting 0"
[ "$("$bin/clients/kvserve-cli" --addr "$addr" tokenize "Hello world" | wc -w)" -ge 2 ]
# head-importance, as docs/inspection.md shows it: 40 heads ranked, the top ones printed, a prunable set.
"$bin/clients/kvserve-cli" --addr "$addr" head-importance --text "$models/stories260K.expected.txt" --top 5 \
  > "$out/importance.txt"
grep -q "^200 tokens scored, baseline mean log-likelihood -0.47" "$out/importance.txt"
"$bin/clients/kvserve-cli" --addr "$addr" head-importance --text - --top 5 < "$models/stories260K.expected.txt" \
  > "$out/importance-stdin.txt"
cmp "$out/importance.txt" "$out/importance-stdin.txt" || { echo "head-importance --text - differs"; exit 1; }
[ "$(grep -cE '^ +[0-9]+ +[0-4] +[0-7] ' "$out/importance.txt")" = 5 ] || { cat "$out/importance.txt"; exit 1; }
grep -q "^prunable within a budget of 0.0100 nats/token" "$out/importance.txt"
# score: the same mean as head-importance's baseline on the same text, and on a quantized file the
# mean llama.cpp computes on its dequantized twin (reference-logprobs.json).
"$bin/clients/kvserve-cli" --addr "$addr" score --text "$models/stories260K.expected.txt" > "$out/score.txt"
grep -q "^tokens scored: 200$" "$out/score.txt" || { cat "$out/score.txt"; exit 1; }
baseline=$(sed -n 's/^200 tokens scored, baseline mean log-likelihood \(-[0-9.]*\).*/\1/p' "$out/importance.txt")
mean=$(sed -n 's/^mean log-probability: \(-[0-9.]*\) nats.*/\1/p' "$out/score.txt")
awk -v a="$baseline" -v b="$mean" 'BEGIN { d = a - b; exit !(d < 1e-4 && d > -1e-4) }' \
  || { echo "score mean $mean differs from head-importance baseline $baseline"; exit 1; }
if [ -f "$models/quant/stories260K-q8_0.gguf" ]; then
  "$bin/server/kvserve" --model "$models/quant/stories260K-q8_0.gguf" --listen 127.0.0.1:0 --port-file "$out/port2" \
    --set cache.num_blocks=256 > "$out/server2.log" 2>&1 &
  echo $! >> "$out/pid"
  for _ in $(seq 200); do [ -f "$out/port2" ] && break; sleep 0.05; done
  grep -q "weights: file Q8_0" "$out/server2.log" || { cat "$out/server2.log"; exit 1; }
  "$bin/clients/kvserve-cli" --addr "127.0.0.1:$(cat "$out/port2")" score --text "$models/reference-text.txt" > "$out/score2.txt"
  want=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["models"]["quant/stories260K-q8_0.dequant-f32.gguf"]["visible1"]["mean_logprob"])' "$models/reference-logprobs.json")
  got=$(sed -n 's/^mean log-probability: \(-[0-9.]*\) nats.*/\1/p' "$out/score2.txt")
  # The prompt runs on 8-bit activations (the integer GEMM, as llama.cpp's CPU path does): its
  # mean within 0.01 of the exact arithmetic on the twin, the bound of tests/model/test_reference_logprobs.cc.
  awk -v a="$want" -v b="$got" 'BEGIN { d = a - b; exit !(d < 0.01 && d > -0.01) }' \
    || { echo "Q8_0 score $got, llama.cpp on the twin $want"; exit 1; }
fi
# The operator issue's CLI cases: --stop before the prompt takes one value; the prompt from
# standard input; --top-logprobs prints each token's alternatives; tokenize prints the pieces;
# failures print the status name (and a hint when no server answers); abort by request id.
cli=("$bin/clients/kvserve-cli" --addr "$addr")
text=$("${cli[@]}" generate --stop "girl" "Once upon a time" --max-tokens 8 --temperature 0)
[ "$text" = ", there was a little " ] || { echo "generate --stop girl PROMPT printed '$text'"; exit 1; }
text=$(printf 'Once upon a time' | "${cli[@]}" generate - --max-tokens 8 --temperature 0)
[ "$text" = ", there was a little girl" ] || { echo "generate - (stdin) printed '$text'"; exit 1; }
printf 'Once upon a time' > "$out/prompt.txt"
text=$("${cli[@]}" generate --prompt-file "$out/prompt.txt" --max-tokens 8 --temperature 0)
[ "$text" = ", there was a little girl" ] || { echo "generate --prompt-file printed '$text'"; exit 1; }
"${cli[@]}" generate "Once upon a time" --max-tokens 4 --temperature 0 --top-logprobs 2 2> "$out/lp.txt" > /dev/null
[ "$(grep -cE '^\[logprob\] token [0-9]+ -?[0-9.]+ \| [0-9]+ -?[0-9.]+ [0-9]+ -?[0-9.]+$' "$out/lp.txt")" = 4 ] \
  || { echo "--top-logprobs 2 printed:"; cat "$out/lp.txt"; exit 1; }
"${cli[@]}" tokenize "Once upon a time" > "$out/tok.txt"
[ "$(sed -n 1p "$out/tok.txt")" = "1 403 407 261 378" ] && [ "$(sed -n 2p "$out/tok.txt")" = "'<s>' '▁Once' '▁upon' '▁a' '▁time'" ] \
  || { echo "tokenize printed:"; cat "$out/tok.txt"; exit 1; }
! "${cli[@]}" generate "x" --top-p 7 2> "$out/err.txt" > /dev/null
grep -q "^kvserve-cli: INVALID_ARGUMENT: .*top_p" "$out/err.txt" || { cat "$out/err.txt"; exit 1; }
! "$bin/clients/kvserve-cli" --addr 127.0.0.1:1 --timeout 2 info 2> "$out/err2.txt"
grep -q "^kvserve-cli: UNAVAILABLE: " "$out/err2.txt" && grep -q "no server answered at 127.0.0.1:1" "$out/err2.txt" \
  || { cat "$out/err2.txt"; exit 1; }
"${cli[@]}" generate "Once upon a time" --max-tokens 2000 --ignore-eos --request-id walk-abort --verbose \
  > /dev/null 2> "$out/aborted.txt" &
gen_pid=$!
for _ in $(seq 100); do "${cli[@]}" abort walk-abort > "$out/abort.txt" 2>&1 && break; sleep 0.05; done
grep -qx aborted "$out/abort.txt" || { cat "$out/abort.txt"; exit 1; }
! wait "$gen_pid"
grep -q "CANCELLED" "$out/aborted.txt" || { cat "$out/aborted.txt"; exit 1; }
[ "$("${cli[@]}" abort walk-abort 2>&1)" = "not found (no running Generate has that id for this token)" ]
# docs/inspection.md's inspect figures, from its command: on stories260K.expected.txt three heads are
# previous-token (1/3, 1/6, 3/6), eleven local, the rest mixed.
"${cli[@]}" inspect "$(cat "$models/stories260K.expected.txt")" > "$out/inspect.txt"
head -1 "$out/inspect.txt" | grep -q "^201 tokens, 5 layers x 8 heads" || { head -3 "$out/inspect.txt"; exit 1; }
[ "$(awk 'NR > 2 && $3 == "previous-token" {printf "%s/%s ", $1, $2}' "$out/inspect.txt")" = "1/3 1/6 3/6 " ] \
  || { cat "$out/inspect.txt"; exit 1; }
[ "$(awk 'NR > 2 && $3 == "local"' "$out/inspect.txt" | wc -l)" = 11 ] || { cat "$out/inspect.txt"; exit 1; }
# kvserve-cli chat over the HTTP API: two turns from a pipe, each answered on its own line.
printf 'Hello\nTell me a story\n' | "${cli[@]}" chat --http "127.0.0.1:$(cat "$out/port.http")" --quiet --max-tokens 8 \
  --temperature 0 > "$out/chat.txt"
[ "$(wc -l < "$out/chat.txt")" = 2 ] && [ -n "$(head -1 "$out/chat.txt")" ] || { cat "$out/chat.txt"; exit 1; }
grep -q "request .* done (http /v1/chat/completions): prompt [0-9]* tokens, output 8 tokens" "$out/server.log" \
  || { tail -5 "$out/server.log"; exit 1; }
# docs/api.md's Python example, exactly as written there (with this server's address).
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
text=$(/usr/bin/python3 "$root/clients/python/generate.py" --addr "$addr" --stubs "$bin/python" --max-tokens 8 \
  --temperature 0 "Once upon a time" 2> "$out/py.txt")
[ "$text" = ", there was a little girl" ] || { echo "generate.py printed '$text'"; cat "$out/py.txt"; exit 1; }
grep -q "^\[FINISH_REASON_LENGTH: 5 prompt and 8 generated tokens\]" "$out/py.txt" || { cat "$out/py.txt"; exit 1; }
echo "cli walkthrough: all checks passed"
