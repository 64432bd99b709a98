#!/usr/bin/env bash
# The head atlas as a user gets it and looks at it: kvserve-cli inspect --html against a running
# server, the page opened in headless Chromium (no network) by puppeteer-core and checked by
# tests/tools/head_atlas_check.mjs: size bound, every head in an overview that fits 1,400 px, each map
# drawn, hover read-outs against the server's float weights, a screenshot kept as an artefact.
# Cases: stories260K at 16 and 256 tokens (importance measured), the ~110M synthetic shape in Q8_0
# at 16 and 256 tokens, and a synthetic model of 32 x 32 = 1,024 heads at 16 tokens.
# Usage: attention_report_browser_test.sh BIN_DIR SHARED_MODELS_DIR REQUIRE_SHARED(0|1) ARTIFACT_DIR
set -euo pipefail
bin="$1"; models="$2"; require="$3"; artifacts="$4"
src="$(cd "$(dirname "$0")" && pwd)"
skip() { echo "$1; skipping"; [ "$require" = 1 ] && exit 1 || exit 77; }
[ -f "$models/stories260K.gguf" ] || skip "test data $models/stories260K.gguf not found"
chromium=$(command -v chromium || true)
[ -n "$chromium" ] || skip "chromium not installed (scripts/deps.sh --test installs it)"
command -v npm > /dev/null || skip "npm not found"
npm_dir="$bin/npm-puppeteer"
. "$src/head_atlas_lib.sh"
ensure_puppeteer || skip "npm could not install puppeteer-core"
out=$(mktemp -d)
trap 'for p in "$out"/pid.*; do kill "$(cat "$p")" 2>/dev/null || true; done; rm -rf "$out"' EXIT
mkdir -p "$artifacts"

stories=$(serve stories "$models/stories260K.gguf")
atlas "$stories" head-atlas-16 16 40 200000 --importance
atlas "$stories" head-atlas-256 256 40 3000000 --importance --budget 0.02
# The page's pruning answer and KV what-if are the CLI's.
"$bin/clients/kvserve-cli" --addr "$stories" head-importance --text "$out/head-atlas-256.txt" --budget 0.02 > "$out/importance"
prunable=$(sed -n 's/^prunable within a budget of 0.0200 nats\/token: \([0-9]*\) heads.*/\1/p' "$out/importance")
grep -q "<b>$prunable of 40 heads</b> can be removed together within 0.0200" "$artifacts/head-atlas-256.html" \
  || { echo "the page's removable set is not the CLI's $prunable heads"; cat "$out/importance"; exit 1; }
"$bin/clients/kvserve-cli" --addr "$stories" info > "$out/info"
for layout in MHA GQA-2 GQA-4 MQA MLA; do
  bytes=$(awk -v l="$layout" '$1 == l {print $2}' "$out/info" | sed ':a;s/\B[0-9]\{3\}\>/,&/;ta')
  [ -n "$bytes" ] || { echo "info has no $layout row"; cat "$out/info"; exit 1; }
  grep -q "<tr><td>$layout</td><td class=\"num\">[^<]*</td><td class=\"num\">$bytes</td>" \
    "$artifacts/head-atlas-256.html" || { echo "the page's $layout row is not $bytes bytes a token"; exit 1; }
done

# The ~110M synthetic shape (768 wide, 12 layers of 12 heads), quantized: 144 heads.
"$bin/engine/kvserve-mkmodel" --out "$out/m110.gguf" --dim 768 --layers 12 --heads 12 --kv-heads 12 --ffn 2048 \
  --vocab 32000 --dtype Q8_0 > /dev/null 2>&1
m110=$(serve m110 "$out/m110.gguf" 64)
atlas "$m110" head-atlas-110M-16 16 144 400000
atlas "$m110" head-atlas-110M-256 256 144 10800000  # the 40-head bound of 3 MB, per head

"$bin/engine/kvserve-mkmodel" --out "$out/wide.gguf" --dim 256 --layers 32 --heads 32 --kv-heads 8 --ffn 256 \
  --vocab 512 > /dev/null 2>&1
wide=$(serve wide "$out/wide.gguf")
atlas "$wide" head-atlas-1024-heads 16 1024 1000000
echo "head atlas: 40 and 144 heads at 16 and 256 tokens, 1,024 heads at 16; pages and screenshots in $artifacts"
