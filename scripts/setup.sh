#!/usr/bin/env bash
# Installs every Debian package the project needs to build, test and run
# (scripts/setup.sh --bench: and to run the benchmarks' PyTorch peer).
# Idempotent: only what is missing is installed, so a second run is a no-op.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libtorch-dev libgloo-dev            # LibTorch 1.13 (CPU); Gloo headers for c10d
  libopenblas0-openmp                 # replaces reference BLAS behind libblas.so.3 (12x matmul)
  libboost-dev                        # Boost.DLL (header-only) for plugin loading
  libyaml-cpp-dev libspdlog-dev libfmt-dev
  nlohmann-json3-dev                  # JSON for datasets, plugin config, logs
  libcli11-dev                        # command line
  libginac-dev libcln-dev             # computer algebra for the accuracy reward
  libpcre2-dev                        # Unicode regex (tokenizer pre-split)
  libutf8proc-dev                     # Unicode NFC normalization (tokenizer)
  libcpp-httplib-dev                  # rollout protocol
  libsnappy-dev libzstd-dev zlib1g-dev  # the codecs of Parquet datasets
  libdlpack-dev                       # reference dlpack.h, checked against the SDK's own copy
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev            # libFuzzer and the sanitizers (scripts/fuzz.sh)
)
# --bench: also the plain PyTorch peer that bench_engine --peer and bench_step --shape measure against.
if [ "${1:-}" = "--bench" ]; then PACKAGES+=(python3-torch); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi
