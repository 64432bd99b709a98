#!/usr/bin/env bash
# The HTTP API with the clients people use: the official `openai` npm package (pinned, installed
# once into the build folder) for models and completions, and curl for the error cases: a bad
# field (400 naming it), a missing bearer token (401), an oversize body (413), an unknown model
# (404), and a client that disconnects mid-stream (its request cancelled, every block freed);
# then over HTTPS with the gRPC port's certificate and bearer tokens.
# Exit 77 (skipped) when ../shared or npm is missing, unless REQUIRE is 1.
# Usage: openai_client_test.sh SOURCE_DIR BUILD_DIR SHARED_MODELS_DIR REQUIRE(0|1)
set -euo pipefail
src="$1" build="$2" models="$3" require="$4"
skip() { echo "$1"; [ "$require" = 1 ] && exit 1; exit 77; }
[ -f "$models/stories260K.gguf" ] || skip "test data $models/stories260K.gguf not found"
npm_dir="$build/npm-openai"
if [ ! -d "$npm_dir/node_modules/openai" ] || [ ! -d "$npm_dir/node_modules/zod" ]; then
  mkdir -p "$npm_dir"
  (cd "$npm_dir" && timeout 300 npm install --no-audit --no-fund --silent openai@5.12.0 zod@3.25.76) \
    || skip "npm could not install openai and zod"
fi
out=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$out"; }
trap cleanup EXIT
start() {  # start NAME ARGS...: a server on free ports; its HTTP port in $out/NAME.port.http
  local name=$1; shift
  "$build/server/kvserve" --model "$models/stories260K.gguf" --listen 127.0.0.1:0 --port-file "$out/$name.port" \
    --set cache.num_blocks=256 --set server.metrics_listen='""' --set server.http_listen='"127.0.0.1:0"' \
    --set server.max_message_bytes=65536 "$@" > "$out/$name.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 200); do [ -f "$out/$name.port.http" ] && break; sleep 0.05; done
  [ -f "$out/$name.port.http" ] || { cat "$out/$name.log"; exit 1; }
}
start open
http="http://127.0.0.1:$(cat "$out/open.port.http")"
expected=$("$build/engine/kvserve-generate" --model "$models/stories260K.gguf" --prompt "Once upon a time" \
  --max-tokens 12 --temperature 0 --ignore-eos 2> /dev/null)
cp "$src/tests/tools/openai_client_test.mjs" "$npm_dir/test.mjs"
node "$npm_dir/test.mjs" "$http/v1" stories260K "$expected" 5 12

code() { curl -s -o "$out/body" -w "%{http_code}" "$@"; }
[ "$(code "$http/v1/completions" -d '{"model":"stories260K","prompt":"x","max_tokens":0}')" = 400 ] && grep -q '"param":"max_tokens"' "$out/body" \
  || { echo "max_tokens 0: $(cat "$out/body")"; exit 1; }
[ "$(code "$http/v1/completions" -d '{"model":"gpt-4","prompt":"x"}')" = 404 ] || { cat "$out/body"; exit 1; }
# Constraints refused with the field and the keyword named; unknown fields refused by name.
[ "$(code "$http/v1/completions" -d '{"model":"stories260K","prompt":"x","response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"type":"object","patternProperties":{}}}}}')" = 400 ] \
  && grep -q '"param":"response_format"' "$out/body" && grep -q "patternProperties" "$out/body" || { echo "schema keyword: $(cat "$out/body")"; exit 1; }
[ "$(code "$http/v1/completions" -d '{"model":"stories260K","prompt":"x","structured_outputs":{"regex":"(a"}}')" = 400 ] \
  && grep -q '"param":"structured_outputs"' "$out/body" || { echo "regex: $(cat "$out/body")"; exit 1; }
[ "$(code "$http/v1/completions" -d '{"model":"stories260K","prompt":"x","grammar":"root ::= \"a\"","json_schema":{}}')" = 400 ] \
  && grep -q "only one constraint" "$out/body" || { echo "two constraints: $(cat "$out/body")"; exit 1; }
[ "$(code "$http/v1/completions" -d '{"model":"stories260K","prompt":"x","mirostat":2}')" = 400 ] \
  && grep -q '"param":"mirostat"' "$out/body" || { echo "unknown field: $(cat "$out/body")"; exit 1; }
[ "$(code "$http/v1/completions" -d '{"model":"stories260K","prompt":"x","logit_bias":{"999999":5}}')" = 400 ] \
  && grep -q '"param":"logit_bias"' "$out/body" || { echo "logit_bias: $(cat "$out/body")"; exit 1; }
# llama.cpp's grammar field and vLLM's choice, answered within them.
[ "$(code "$http/v1/completions" -d '{"model":"stories260K","prompt":"Once","max_tokens":40,"grammar":"root ::= (\"yes\" | \"no\") \"!\""}')" = 200 ] \
  && grep -qE '"text":"(yes|no)!"' "$out/body" || { echo "grammar: $(cat "$out/body")"; exit 1; }
[ "$(code "$http/v1/completions" -d '{"model":"stories260K","prompt":"Once","max_tokens":40,"structured_outputs":{"choice":["up","down"]}}')" = 200 ] \
  && grep -qE '"text":"(up|down)"' "$out/body" || { echo "choice: $(cat "$out/body")"; exit 1; }
[ "$(code "$http/v1/completions" -d 'not json')" = 400 ] && grep -q "not valid JSON" "$out/body" || { cat "$out/body"; exit 1; }
head -c 100000 /dev/zero | tr '\0' 'a' > "$out/big"
[ "$(code "$http/v1/completions" --data-binary @"$out/big")" = 413 ] || { echo "oversize: $(cat "$out/body")"; exit 1; }
[ "$(code "$http/v1/nothing")" = 404 ] || exit 1
[ "$(code "$http/health")" = 200 ] || exit 1
# A client that goes away mid-stream: the request is cancelled at the next step, blocks freed.
cli=("$build/clients/kvserve-cli" --addr "127.0.0.1:$(cat "$out/open.port")")
generated() { "${cli[@]}" stats | sed -n 's/.*generated tokens \([0-9]*\).*/\1/p'; }
before=$(generated)
curl -sN "$http/v1/completions" \
  -d '{"model":"stories260K","prompt":"Once upon a time","max_tokens":2000,"ignore_eos":true,"stream":true}' \
  > "$out/partial" 2>/dev/null &
curl_pid=$!
for _ in $(seq 200); do [ "$(grep -c '^data: ' "$out/partial")" -ge 5 ] && break; sleep 0.01; done
kill "$curl_pid"; wait "$curl_pid" 2>/dev/null || true
[ "$(grep -c '^data: ' "$out/partial")" -ge 5 ] || { echo "the stream sent nothing"; exit 1; }
for _ in $(seq 100); do "${cli[@]}" stats | grep -q "^running 0, waiting 0" && break; sleep 0.05; done
"${cli[@]}" stats | grep -q "^running 0, waiting 0" || { "${cli[@]}" stats; echo "the abandoned stream still runs"; exit 1; }
"${cli[@]}" stats | grep -qE "^blocks 0 used" || { "${cli[@]}" stats; echo "blocks not freed"; exit 1; }
[ $(( $(generated) - before )) -lt 2000 ] || { echo "the abandoned request ran to its end"; exit 1; }

# With TLS (the gRPC port's certificate) and bearer tokens: plaintext fails; no token or a wrong
# one is 401; the right one works, for the SDK too.
echo "secret-token-1" > "$out/tokens"
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -keyout "$out/key.pem" -out "$out/cert.pem" -subj /CN=localhost \
  -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" > /dev/null 2>&1
start auth --set server.auth_token_file="\"$out/tokens\"" --set server.tls_cert_file="\"$out/cert.pem\"" \
  --set server.tls_key_file="\"$out/key.pem\""
grep -q "HTTP API on https://" "$out/auth.log" || { cat "$out/auth.log"; exit 1; }
ahttp="https://localhost:$(cat "$out/auth.port.http")"
! curl -s -o /dev/null "http://localhost:$(cat "$out/auth.port.http")/v1/models" --max-time 5 -w "%{http_code}" | grep -q 200
[ "$(code --cacert "$out/cert.pem" "$ahttp/v1/models")" = 401 ] && grep -q "bearer token" "$out/body" || { cat "$out/body"; exit 1; }
[ "$(code --cacert "$out/cert.pem" -H "Authorization: Bearer nope" "$ahttp/v1/models")" = 401 ] || exit 1
[ "$(code --cacert "$out/cert.pem" -H "Authorization: Bearer secret-token-1" "$ahttp/v1/models")" = 200 ] || exit 1
KVSERVE_TOKEN=secret-token-1 NODE_EXTRA_CA_CERTS="$out/cert.pem" node "$npm_dir/test.mjs" "$ahttp/v1" stories260K "$expected" 5 12
echo "openai client test: all checks passed"
