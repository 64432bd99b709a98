#!/usr/bin/env bash
# The attention report, as a user would get it and look at it: kvserve-cli inspect --html against
# a running server, the page opened in headless Chromium (no network), and checked to have drawn a
# heat map for every head; a screenshot is kept as an artifact.
# Usage: attention_report_browser_test.sh BIN_DIR SHARED_MODELS_DIR REQUIRE_SHARED(0|1) ARTIFACT_DIR
set -euo pipefail
bin="$1"; models="$2"; require="$3"; artifacts="$4"
if [ ! -f "$models/stories260K.gguf" ]; then
  echo "test data $models/stories260K.gguf not found; skipping"
  [ "$require" = 1 ] && exit 1 || exit 77
fi
chromium=$(command -v chromium || true)
if [ -z "$chromium" ]; then
  echo "chromium not installed (scripts/deps.sh --test installs it); skipping"
  [ "${CI:-}" = true ] && exit 1 || exit 77
fi
out=$(mktemp -d)
trap 'kill $(cat "$out/pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$out"' EXIT
mkdir -p "$artifacts"

"$bin/server/kvserve" --model "$models/stories260K.gguf" --listen 127.0.0.1:0 --port-file "$out/port" \
  --set cache.num_blocks=256 > "$out/server.log" 2>&1 &
echo $! > "$out/pid"
for _ in $(seq 200); do [ -f "$out/port" ] && break; sleep 0.05; done
addr="127.0.0.1:$(cat "$out/port")"
report="$artifacts/attention_report.html"
"$bin/clients/kvserve-cli" --addr "$addr" inspect \
  "Once upon a time, there was a little girl named Lily. She loved to play outside." --html "$report" > "$out/table.txt"
heads=$(($(wc -l < "$out/table.txt") - 3))  # header lines and the report line
[ "$heads" = 40 ] || { echo "expected 40 heads in the table, got $heads"; cat "$out/table.txt"; exit 1; }

# Self-contained: nothing the page could fetch.
if grep -Eq '(src|href)=|https?://|@import|url\(' "$report"; then echo "the report refers to something outside it"; exit 1; fi

flags=(--headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$out/profile" --virtual-time-budget=10000)
"$chromium" "${flags[@]}" --dump-dom "file://$report" > "$out/dom.html" 2> "$out/chromium.log"
drawn=$(grep -o '<canvas class="heatmap"[^>]*data-painted="[1-9][0-9]*"' "$out/dom.html" | wc -l)
# Every head of 5 layers x 8 heads, each with all n(n+1)/2 cells of its lower triangle painted.
[ "$drawn" = 40 ] || { echo "expected 40 painted heat maps, the browser drew $drawn"; tail -5 "$out/chromium.log"; exit 1; }
n=$(head -1 "$out/table.txt" | cut -d' ' -f1)
cells=$(( n * (n + 1) / 2 ))
bad=$(grep -o 'data-painted="[0-9]*"' "$out/dom.html" | grep -vc "data-painted=\"$cells\"" || true)
[ "$bad" = 0 ] || { echo "$bad heat maps do not have all $cells cells of $n tokens"; exit 1; }
grep -q 'data-heads="40"' "$out/dom.html"
"$chromium" "${flags[@]}" --window-size=1400,1800 --screenshot="$artifacts/attention_report.png" "file://$report" \
  2>> "$out/chromium.log"
[ -s "$artifacts/attention_report.png" ] || { echo "no screenshot"; exit 1; }
echo "attention report: 40 heat maps of $n tokens drawn; screenshot $artifacts/attention_report.png"
