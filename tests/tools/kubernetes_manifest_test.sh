#!/usr/bin/env bash
# docs/kubernetes/kvserve.yaml and inference-gateway.yaml: the structural checks
# (tests/tools/test_kubernetes_manifest.py, test_inference_gateway_manifest.py: what makes each
# deployable and routable as written), the embedded configs against the server's own
# validation, then every object against its API's schemas (kubernetes-models and
# @kubernetes-models/gateway-api from npm, pinned, installed once into the build folder; the
# InferencePool, which no npm package carries, by the structural check against its CRD's rules).
# Exit 77 (skipped) when npm cannot fetch them, unless REQUIRE is 1.
# Usage: kubernetes_manifest_test.sh SOURCE_DIR BUILD_DIR REQUIRE(0|1)
set -euo pipefail
src="$1" build="$2" require="$3"
manifest="$src/docs/kubernetes/kvserve.yaml" gateway="$src/docs/kubernetes/inference-gateway.yaml"
/usr/bin/python3 "$src/tests/tools/test_kubernetes_manifest.py" "$manifest"
/usr/bin/python3 "$src/tests/tools/test_inference_gateway_manifest.py" "$gateway"
# The embedded configs pass the server's own validation: with a model that does not exist the
# server gets as far as loading it (exit 1), where a config error would be exit 2.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for m in "$manifest" "$gateway"; do
  /usr/bin/python3 -c 'import sys, yaml; [print(d["data"]["kvserve.json"]) for d in yaml.safe_load_all(open(sys.argv[1])) if d and d["kind"] == "ConfigMap" and "kvserve.json" in d["data"]]' \
    "$m" > "$tmp/kvserve.json"
  code=0
  "$build/server/kvserve" --config "$tmp/kvserve.json" --set model.path="\"$tmp/none.gguf\"" > "$tmp/log" 2>&1 || code=$?
  [ "$code" = 1 ] && grep -q "none.gguf" "$tmp/log" || { echo "$m's config: exit $code"; cat "$tmp/log"; exit 1; }
done
npm_dir="$build/npm-kubernetes"
if [ ! -d "$npm_dir/node_modules/kubernetes-models" ] || [ ! -d "$npm_dir/node_modules/@kubernetes-models/gateway-api" ]; then
  mkdir -p "$npm_dir"
  if ! (cd "$npm_dir" && timeout 300 npm install --no-audit --no-fund --silent kubernetes-models@4.5.1 js-yaml@4.1.0 \
          @kubernetes-models/gateway-api@2.0.0); then
    echo "npm could not install kubernetes-models: schema check not run"
    [ "$require" = 1 ] && exit 1
    exit 77
  fi
fi
cp "$src/tests/tools/kubernetes_schema_check.mjs" "$npm_dir/check.mjs"
node "$npm_dir/check.mjs" "$manifest"
node "$npm_dir/check.mjs" "$gateway"
