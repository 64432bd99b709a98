#!/usr/bin/env bash
# docs/inspection.md's head atlas screenshots: kvserve-cli inspect --html --importance at 13 and 256 tokens
# on stories260K and on the ~110M synthetic shape (Q8_0), each page checked as the browser test
# checks it (tests/tools/head_atlas_check.mjs) and photographed hovered in a 1,400 x 1,500 window.
# Writes docs/images/head-atlas-*.png; the 256-token ~110M page takes a few minutes (144 ablations).
# Usage: scripts/head-atlas-screenshots.sh [SHARED_MODELS_DIR]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${KVSERVE_BUILD_DIR:-$root/build}"
models="${1:-$root/../shared/models}"
chromium=$(command -v chromium)
npm_dir="$bin/npm-puppeteer"
. "$root/tests/tools/head_atlas_lib.sh"
ensure_puppeteer
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
cmake --build "$bin" -j "$(nproc)" --target kvserve kvserve-cli kvserve-mkmodel > /dev/null
out=$(mktemp -d)
trap 'for p in "$out"/pid.*; do kill "$(cat "$p")" 2>/dev/null || true; done; rm -rf "$out"' EXIT
artifacts="$out/pages"
mkdir -p "$artifacts" "$root/docs/images"
export ATLAS_HEIGHT=1500

stories=$(serve stories "$models/stories260K.gguf")
# Hovered: a previous-token head of stories260K; the synthetic model's middle head.
ATLAS_HEAD=1.6 atlas "$stories" stories260K-13 13 40 3000000 --importance
ATLAS_HEAD=1.6 atlas "$stories" stories260K-256 256 40 3000000 --importance
"$bin/engine/kvserve-mkmodel" --out "$out/m110.gguf" --dim 768 --layers 12 --heads 12 --kv-heads 12 --ffn 2048 \
  --vocab 32000 --dtype Q8_0 > /dev/null 2>&1
synthetic=$(serve synthetic "$out/m110.gguf" 64)
atlas "$synthetic" synthetic-110M-13 13 144 3000000 --importance
atlas "$synthetic" synthetic-110M-256 256 144 10800000 --importance
for name in stories260K-13 stories260K-256 synthetic-110M-13 synthetic-110M-256; do
  cp "$artifacts/$name.png" "$root/docs/images/head-atlas-$name.png"
done
ls -l "$root"/docs/images/head-atlas-*.png
