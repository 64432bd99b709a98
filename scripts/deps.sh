#!/usr/bin/env bash
# The one list of Debian packages kvserve needs, in groups. Installs only what is missing;
# needs root (or sudo).
#   deps.sh              build (serve.sh, bench.sh, the Dockerfile's build stage)
#   deps.sh --test       build + what the test suite runs (test.sh, sanitize.sh)
#   deps.sh --container  build + test + what scripts/container-test.sh runs
set -euo pipefail

# Build dependencies (Debian bookworm package names).
#   libpcre2-dev: Unicode categories (UCP) for the GPT-2 pre-tokenizer regex.
#   libcli11-dev: command-line parsing for the tools, the server and the client.
#   libmicrohttpd-dev: the Prometheus /metrics endpoint (one epoll thread for all connections,
#     so idle or slow clients cannot hold up a scrape).
#   libcpp-httplib-dev: the HTTP client in the metrics tests.
#   ccache: keeps rebuilds in CI and on developer machines short.
#   zlib1g-dev: the head atlas page (kvserve-cli inspect --html) deflates its attention weights.
#   libzmq3-dev: ZeroMQ, over which the KV-cache events are published (server.kv_events_endpoint),
#     as vLLM publishes them for llm-d's prefix-cache routing.
#   ocl-icd-opencl-dev: only a "Recommends" of libdnnl-dev, but Debian's oneDNN CMake package
#     requires OpenCL to be found (a bare bookworm image fails at cmake without it).
KVSERVE_BUILD_PACKAGES=(
  cmake g++ make ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev libdnnl-dev ocl-icd-opencl-dev nlohmann-json3-dev libgtest-dev libpcre2-dev libcli11-dev
  libcpp-httplib-dev libmicrohttpd-dev zlib1g-dev libzmq3-dev
  python3
)
# Test dependencies.
#   python3-grpcio / python3-protobuf: the independent Python client in the end-to-end tests.
#   clang, libclang-rt-14-dev: libFuzzer targets (tests/fuzz), run for a bounded time by test.sh.
#   openssl: the TLS test makes its own certificate. python3-yaml: the Kubernetes manifest check.
#   chromium: the head atlas page in a headless browser (tests/tools/attention_report_browser_test.sh,
#     driven by puppeteer-core, which that test fetches with npm into the build folder).
#   curl: the HTTP API's error cases (tests/tools/openai_client_test.sh). Node.js and npm, for the
#   official `openai` npm client there, come with the machine (Node 20), not from this list.
#   (npm, fetched by the test itself into the build folder: kubernetes-models and js-yaml for
#   the Kubernetes manifest's schema check, tests/tools/kubernetes_manifest_test.sh.)
#   python3-regex: Python's `regex` module, the independent runner of Llama 3's and Qwen2's
#   pre-tokenizer patterns (tests/tools/test_pre_tokenizer_regex.py). python3-jinja2: the reference
#   renderer of chat templates on conversations not in shared/ (tests/tools/test_chat_template_jinja2.py).
#   python3-jsonschema: the independent validator of JSON-Schema-constrained outputs
#   (tests/tools/test_constrained_outputs.py). python3-zmq, python3-msgpack: the KV-event
#   subscriber that rebuilds the server's prefix-cache index (tests/tools/test_kv_events.py).
#   haproxy: the load balancer of scripts/replicas.sh (its test, tests/tools/replicas_test.sh,
#   and scripts/bench-replicas.sh).
KVSERVE_TEST_PACKAGES=(
  python3-grpcio python3-protobuf python3-yaml openssl clang libclang-rt-14-dev chromium python3-regex python3-jinja2 python3-jsonschema
  python3-zmq python3-msgpack haproxy curl
)
# The container test: builds and runs the Dockerfile without a Docker daemon.
KVSERVE_CONTAINER_PACKAGES=(buildah podman runc debootstrap uidmap slirp4netns fuse-overlayfs)

packages=("${KVSERVE_BUILD_PACKAGES[@]}")
case "${1:-}" in
  "") ;;
  --test) packages+=("${KVSERVE_TEST_PACKAGES[@]}") ;;
  --container) packages+=("${KVSERVE_TEST_PACKAGES[@]}" "${KVSERVE_CONTAINER_PACKAGES[@]}") ;;
  *) echo "deps.sh: unknown option $1 (expected --test or --container)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#packages[@]} packages present" >&2
  exit 0
fi

echo "deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
