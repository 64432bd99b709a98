# Sourced by the bench scripts: the synthetic model shapes they run on and one kvserve started
# on free ports. Expects $build and $out to be set by the caller.

# synthetic_model DIM LAYERS HEADS FFN: prints the path of an f32 model of that shape (vocabulary
# 32,000, context 2,048, as many KV heads as heads), writing it with kvserve-mkmodel if missing.
synthetic_model() {
  local m="$build/models/bench-d$1-l$2-h$3-kv$3-f$4-v32000-f32.gguf"
  mkdir -p "$build/models"
  [ -f "$m" ] || "$build/engine/kvserve-mkmodel" --out "$m" --dim "$1" --layers "$2" --heads "$3" --kv-heads "$3" \
    --ffn "$4" --vocab 32000 --context 2048 > /dev/null
  echo "$m"
}

# start_server NAME MODEL [SERVER ARGS...]: kvserve on free gRPC and HTTP ports (no separate
# metrics port, warnings only), its log in $out/server-NAME.log, stopped when the script exits.
# Sets server_pid, grpc (host:port) and http (host:port).
start_server() {
  local name=$1 model=$2; shift 2
  rm -f "$out/$name-port" "$out/$name-port.http"
  "$build/server/kvserve" --model "$model" --listen 127.0.0.1:0 --port-file "$out/$name-port" \
    --set server.metrics_listen='""' --set server.http_listen='"127.0.0.1:0"' --set 'server.log_level="warn"' \
    "$@" > "$out/server-$name.log" 2>&1 &
  server_pid=$!
  trap 'kill -TERM "$server_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 1200); do [ -f "$out/$name-port.http" ] && break; sleep 0.1; done
  [ -f "$out/$name-port.http" ] || { echo "kvserve did not start:"; cat "$out/server-$name.log"; exit 1; }
  grpc="127.0.0.1:$(cat "$out/$name-port")" http="127.0.0.1:$(cat "$out/$name-port.http")"
}
