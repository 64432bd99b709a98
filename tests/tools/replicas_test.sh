#!/usr/bin/env bash
# scripts/replicas.sh in its three modes: 2 replicas of stories260K behind HAProxy answer through
# the balancer (prefix and hash modes: the same prompt start goes to the same replica; prefix
# mode places 6 prompt starts 3 and 3, and keeps each where it was placed; a replica's keys move
# to the survivor when it dies); after one replica is SIGKILLed every request still succeeds
# (refused connections retried on the other, the dead one dropped by its health check). Exit 77 (skipped) without haproxy or the model, unless
# REQUIRE is 1. Usage: replicas_test.sh SOURCE_DIR BUILD_DIR SHARED_MODELS_DIR REQUIRE(0|1)
set -euo pipefail
src="$1" build="$2" models="$3" require="$4"
skip() { echo "$1"; [ "$require" = 1 ] && exit 1; exit 77; }
[ -f "$models/stories260K.gguf" ] || skip "test data $models/stories260K.gguf not found"
command -v haproxy > /dev/null || skip "haproxy not installed (scripts/deps.sh --test)"
dir=$(mktemp -d)
base=0 port=0
rp=""
cleanup() { [ -n "$rp" ] && kill -TERM "$rp" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT
ask() {  # ask PROMPT: the replica that answered, or "failed"
  local out
  out=$(curl -s -D - -o "$dir/body" -w "%{http_code}" "http://127.0.0.1:$port/v1/completions" \
    -d "{\"model\":\"stories260K\",\"prompt\":\"$1\",\"max_tokens\":4}") || { echo failed; return; }
  [ "${out: -3}" = 200 ] && grep -q '"finish_reason"' "$dir/body" || { echo failed; return; }
  echo "$out" | tr -d '\r' | sed -n 's/^x-kvserve-replica: //Ip'
}
# Ports below the kernel's ephemeral range (32768 up), so no client connection of another test
# holds one; a block some other program took anyway is retried with another, up to 3 times.
start() {  # start MODE: replicas.sh running as $rp with its balancer up, or exit 1
  local attempt
  for attempt in 1 2 3; do
    base=$((20000 + RANDOM % 1500 * 8)) port=$((base + 6))
    rm -f "$dir/ready"
    "$src/scripts/replicas.sh" --model "$models/stories260K.gguf" --replicas 2 --mode "$1" --port "$port" \
      --base-port "$base" --key-bytes 40 --dir "$dir" -- --set cache.num_blocks=64 > "$dir/replicas.log" 2>&1 &
    rp=$!
    for _ in $(seq 300); do [ -f "$dir/ready" ] || ! kill -0 "$rp" 2>/dev/null && break; sleep 0.1; done
    [ -f "$dir/ready" ] && return
    kill -TERM "$rp" 2>/dev/null || true; wait "$rp" 2>/dev/null || true
    rp=""
    echo "$1: attempt $attempt on ports $base-$port did not start:"; cat "$dir/replicas.log"
  done
  exit 1
}
for mode in roundrobin prefix hash; do
  start "$mode"
  seen=""
  for i in $(seq 8); do
    r=$(ask "Once upon a time $i")
    [ "$r" != failed ] || { echo "$mode: request $i failed"; cat "$dir/haproxy.log"; exit 1; }
    seen+="$r "
  done
  if [ "$mode" = roundrobin ]; then
    [ "$(echo "$seen" | tr ' ' '\n' | sort -u | grep -c r)" = 2 ] || { echo "round robin used one replica: $seen"; exit 1; }
  else
    # The key is the body's first 40 bytes: the model and the prompt's start, the same for all 8.
    [ "$(echo "$seen" | tr ' ' '\n' | sort -u | grep -c r)" = 1 ] || { echo "prefix affinity spread one prefix: $seen"; exit 1; }
  fi
  if [ "$mode" = prefix ]; then
    # Six keys (the body's first 40 bytes differ in the prompt's first letters), twice each.
    placed=""
    for round in 1 2; do
      for k in A B C D E F; do
        r=$(ask "$k$k$k$k$k$k$k$k tale $round")
        [ "$r" != failed ] || { echo "prefix: key $k failed"; exit 1; }
        [ "$round" = 1 ] && placed+="$k=$r "
        [ "$round" = 1 ] || echo "$placed" | grep -q "$k=$r " || { echo "prefix: key $k moved: $placed, then $r"; exit 1; }
      done
    done
    [ "$(echo "$placed" | grep -o '=r0' | wc -l)" = 3 ] || { echo "prefix: six keys not placed 3 and 3: $placed"; exit 1; }
  fi
  kill -KILL "$(cat "$dir/r1.pid")"
  for i in $(seq 12); do
    r=$(ask "After the kill $i")
    [ "$r" = r0 ] || { echo "$mode: after r1 was killed, request $i: $r"; cat "$dir/haproxy.log"; exit 1; }
  done
  kill -TERM "$rp"; wait "$rp" 2>/dev/null || true
  rp=""
done
echo "replicas: round robin over both; prefix affinity (placement and hashing) kept one prompt start on one replica, placement put six 3 and 3; after a SIGKILL every request answered by the survivor"
