#!/usr/bin/env bash
# Builds the Dockerfile and runs the image for real, without a Docker daemon: Debian's buildah,
# podman and runc, and a debian:bookworm base image made here with debootstrap from the
# machine's own apt source. Checks grpc.health.v1 and a streamed Generate from the host against
# a model mounted into the container, then removes what it started.
# Usage: scripts/container-test.sh [BUILD_DIR]   (default build/; state goes to BUILD_DIR/container)
# Needs root. .ci/run calls it after scripts/test.sh (KVSERVE_SKIP_CONTAINER=1 skips it there).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$(realpath -m "${1:-$root/build}")"
work="$build/container"
start=$(date +%s)
say() { echo "container-test: $* ($(( $(date +%s) - start )) s)" >&2; }

"$root/scripts/deps.sh" --container
mkdir -p "$work/storage" "$work/run" "$work/tmp" "$work/model"

# podman's settings, all inside the build folder. This machine needs: host networking (the
# default bridge rewrites the host's iptables), runc (crun refuses the hybrid cgroups), ulimits
# fixed in the config (the shell cannot raise its own), cgroupfs and file-based events (no systemd),
# and logs in a file (where systemd is present podman would send them to journald, which a CI
# machine may not keep, and `podman logs` would then print nothing).
cat > "$work/storage.conf" <<EOF
[storage]
driver = "vfs"
graphroot = "$work/storage"
runroot = "$work/run"
EOF
cat > "$work/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
netns = "host"
log_driver = "k8s-file"
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
tmp_dir = "$work/tmp"
EOF
export CONTAINERS_STORAGE_CONF="$work/storage.conf" CONTAINERS_CONF="$work/containers.conf" TMPDIR="$work/tmp"
export BUILDAH_ISOLATION=chroot
podman=(podman --runtime runc)

name="kvserve-container-test-$$"
cleanup() {
  "${podman[@]}" rm -f "$name" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# 1. The base image, unless an earlier run made it.
if ! "${podman[@]}" image exists debian:bookworm; then
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  mirror="${mirror:-http://deb.debian.org/debian}"
  say "debootstrap bookworm from $mirror"
  rm -rf "$work/rootfs"
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log"; exit 1; }
  rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
  tar -C "$work/rootfs" -c . | "${podman[@]}" import - debian:bookworm > /dev/null
  "${podman[@]}" tag debian:bookworm debian:bookworm-slim
  rm -rf "$work/rootfs"
  say "base image debian:bookworm imported"
fi

# 2. The Dockerfile, exactly as `docker build` would take it.
say "building the image"
"${podman[@]}" build --pull=never --network host --layers=false -t kvserve:container-test -f "$root/Dockerfile" "$root" \
  > "$work/build.log" 2>&1 || { tail -40 "$work/build.log"; exit 1; }
size=$("${podman[@]}" image inspect kvserve:container-test --format '{{.Size}}')
say "image built: $((size / 1048576)) MiB"

# 3. A model the host makes, mounted read-only, and the server inside on a free port.
"$build/engine/kvserve-mkmodel" --out "$work/model/model.gguf" --dim 64 --layers 2 --heads 4 --kv-heads 2 \
  --ffn 128 --vocab 512 --context 512 > /dev/null
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
port=$(free_port) hport=$(free_port)
"${podman[@]}" run -d --name "$name" --network host -v "$work/model:/models:ro" kvserve:container-test \
  --model /models/model.gguf --listen "0.0.0.0:$port" --set server.metrics_listen='""' \
  --set server.http_listen="\"0.0.0.0:$hport\"" > /dev/null
cli=("$build/clients/kvserve-cli" --addr "127.0.0.1:$port" --timeout 5)
for _ in $(seq 120); do "${cli[@]}" health > /dev/null 2>&1 && break; sleep 0.5; done
"${cli[@]}" health | grep -qx SERVING || { "${podman[@]}" logs "$name" | tail -20; echo "no SERVING"; exit 1; }
say "grpc.health.v1: SERVING from the host"

# A streamed Generate: the same greedy tokens as the host's own engine on the same model.
inside=$("${cli[@]}" generate "Hello" --max-tokens 12 --temperature 0 --ignore-eos --verbose 2> "$work/gen.err")
grep -q "finish=LENGTH prompt=[0-9]* completion=12" "$work/gen.err" || { cat "$work/gen.err"; exit 1; }
host=$("$build/engine/kvserve-generate" --model "$work/model/model.gguf" --prompt "Hello" --max-tokens 12 \
  --temperature 0 --ignore-eos 2> /dev/null)
[ "$inside" = "$host" ] || { echo "container generated '$inside', the host '$host'"; exit 1; }
say "Generate streamed 12 tokens, the same as the host's engine"
# The image's HTTP API: the same greedy text from POST /v1/completions.
http_text=$(curl -sf "http://127.0.0.1:$hport/v1/completions" -d '{"model": "model", "prompt": "Hello", "max_tokens": 12,
  "temperature": 0, "ignore_eos": true}' | python3 -c 'import json, sys; print(json.load(sys.stdin)["choices"][0]["text"], end="")')
[ "$http_text" = "$host" ] || { echo "HTTP API generated '$http_text', the host '$host'"; exit 1; }
say "the OpenAI-compatible HTTP API answers with the same text"

# The portable image runs the fastest kernel set this CPU has, read here from /proc/cpuinfo.
flags=$(grep -m1 '^flags' /proc/cpuinfo)
has() { for f in "$@"; do [[ " $flags " == *" $f "* ]] || return 1; done; }
expected=scalar
has avx2 fma f16c bmi2 && expected=avx2
has avx2 fma f16c bmi2 avx512f avx512bw avx512cd avx512dq avx512vl && expected=avx512
"${cli[@]}" info | grep -q "$expected kernels" || { "${cli[@]}" info; echo "the image did not choose the $expected kernels"; exit 1; }
# conmon copies the server's output to the log file on its own time: a few tries.
for _ in $(seq 20); do
  "${podman[@]}" logs "$name" > "$work/server.log" 2>&1 || true
  grep -q "CPU kernels: $expected" "$work/server.log" && break
  sleep 0.5
done
grep -q "CPU kernels: $expected" "$work/server.log" ||
  { echo "the container's log ($(wc -l < "$work/server.log") lines):"; tail -20 "$work/server.log"
    echo "no 'CPU kernels: $expected' in the log"; exit 1; }
say "the portable image runs the $expected kernels, the best this CPU has"

# The image's own health check (kvserve-cli inside the container) on the default port is
# exercised by running it against the port we chose.
"${podman[@]}" exec "$name" kvserve-cli --addr "127.0.0.1:$port" --timeout 2 health | grep -qx SERVING
"${podman[@]}" exec "$name" id -u | grep -qx 10001
say "health check inside the container works; it runs as uid 10001"

"${podman[@]}" stop -t 10 "$name" > /dev/null
code=$("${podman[@]}" inspect "$name" --format '{{.State.ExitCode}}')
[ "$code" = 0 ] || { "${podman[@]}" logs "$name" | tail -20; echo "exit code $code after SIGTERM"; exit 1; }
"${podman[@]}" rm "$name" > /dev/null
say "SIGTERM drained and exited 0; container removed. Image size $((size / 1048576)) MiB"
