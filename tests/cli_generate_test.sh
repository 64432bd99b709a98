#!/usr/bin/env bash
# The README's promise, run as a person would: kvserve-generate prints exactly the public
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
  --set cache.num_blocks=256 > "$out/server.log" 2>&1 &
echo $! > "$out/pid"
for _ in $(seq 200); do [ -f "$out/port" ] && break; sleep 0.05; done
addr="127.0.0.1:$(cat "$out/port")"
"$bin/clients/kvserve-cli" --addr "$addr" health | grep -qx SERVING
text=$("$bin/clients/kvserve-cli" --addr "$addr" generate "Once upon a time" --max-tokens 8 --temperature 0)
[ "$text" = ", there was a little girl" ] || { echo "cli generate printed '$text'"; exit 1; }
"$bin/clients/kvserve-cli" --addr "$addr" info | grep -q "KV bytes per token: 2 x 5 layers x 4 KV heads x 8 head dim x 4 bytes = 1280"
grep -q "Maximum concurrency for 2048 tokens per request" "$out/server.log"
# The README's other client commands: sampling flags, stats, tokenize.
"$bin/clients/kvserve-cli" --addr "$addr" generate "Once upon a time" --max-tokens 64 --temperature 0.8 --top-p 0.95 \
  --seed 7 --stop "." > "$out/sampled.txt"
[ -s "$out/sampled.txt" ] && ! grep -q '\.' "$out/sampled.txt" || { echo "stop string leaked: $(cat "$out/sampled.txt")"; exit 1; }
"$bin/clients/kvserve-cli" --addr "$addr" stats | grep -q "^running 0, waiting 0"
[ "$("$bin/clients/kvserve-cli" --addr "$addr" tokenize "Hello world" | wc -w)" -ge 2 ]
# head-importance, as the README shows it: 40 heads ranked, the top ones printed, a prunable set.
"$bin/clients/kvserve-cli" --addr "$addr" head-importance --text "$models/stories260K.expected.txt" --top 5 \
  > "$out/importance.txt"
grep -q "^200 tokens scored, baseline mean log-likelihood -0.47" "$out/importance.txt"
[ "$(grep -cE '^ +[0-9]+ +[0-4] +[0-7] ' "$out/importance.txt")" = 5 ] || { cat "$out/importance.txt"; exit 1; }
grep -q "^prunable within a budget of 0.0100 nats/token" "$out/importance.txt"
echo "cli walkthrough: all checks passed"
