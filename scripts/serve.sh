#!/usr/bin/env bash
# Installs what is missing, builds kvserve in Release and starts the server on
# configs/default.json. Without --model it serves a synthetic model the project makes itself
# (models/kvserve-default.gguf: 288 wide, 6 layers, 6 heads, 32000 vocab; random weights, so
# its text is noise). Any other argument goes to the server, e.g.:
#   scripts/serve.sh --model ../shared/models/stories260K.gguf --listen 0.0.0.0:50051
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${KVSERVE_BUILD_DIR:-$root/build}"

"$root/scripts/deps.sh"
# libgomp's workers spin up to GOMP_SPINCOUNT times between parallel regions before they sleep.
# Its default (300,000 spins, milliseconds) is fine on cores of one's own, but where another
# process shares them two spinning teams starve each other (ctest -j2: 307 s instead of 37 s).
# 3,000 spins still cover the gaps inside a decode step; the engine runs as fast (110M shape).
export GOMP_SPINCOUNT="${GOMP_SPINCOUNT:-3000}"
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/kvserve-ccache}"
# Paths relative to the checkout, so a fresh clone elsewhere still hits the cache.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
# The server, its client, and what docs/operations.md's tools and docs/api.md's Python example use.
targets=(kvserve kvserve-cli kvserve-mkmodel kvserve-generate kvserve-tokenize kvserve-quantize)
cmake --build "$build" --target help | grep -q kvserve_python_stubs && targets+=(kvserve_python_stubs)
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

cd "$root"
if [[ " $* " != *" --model "* ]] && [ ! -f models/kvserve-default.gguf ]; then
  mkdir -p models
  "$build/engine/kvserve-mkmodel" --out models/kvserve-default.gguf \
    --dim 288 --layers 6 --heads 6 --kv-heads 6 --ffn 768 --vocab 32000 --context 2048 --seed 1
fi
exec "$build/server/kvserve" --config configs/default.json "$@"
