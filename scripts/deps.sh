#!/usr/bin/env bash
# The one list of Debian packages kvserve needs to build and test. Used by test.sh, serve.sh
# and the Dockerfile's build stage. Installs only what is missing; needs root (or sudo).
set -euo pipefail

# Build and test dependencies (Debian bookworm package names).
#   libpcre2-dev: Unicode categories (UCP) for the GPT-2 pre-tokenizer regex.
#   libcli11-dev: command-line parsing for the tools, the server and the client.
#   libcpp-httplib-dev: the Prometheus /metrics endpoint.
#   ccache: keeps rebuilds in CI and on developer machines short.
#   python3-grpcio / python3-protobuf: the independent Python client in the end-to-end tests.
#   clang, libclang-rt-14-dev: libFuzzer targets (tests/fuzz), run for a bounded time by test.sh.
#   openssl: the TLS test makes its own certificate. python3-yaml: the Kubernetes manifest check.
KVSERVE_BUILD_PACKAGES=(
  cmake g++ make ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev libdnnl-dev nlohmann-json3-dev libgtest-dev libpcre2-dev libcli11-dev libcpp-httplib-dev
  python3 python3-grpcio python3-protobuf python3-yaml openssl
  clang libclang-rt-14-dev
)

missing=()
for p in "${KVSERVE_BUILD_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#KVSERVE_BUILD_PACKAGES[@]} packages present" >&2
  exit 0
fi

echo "deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
