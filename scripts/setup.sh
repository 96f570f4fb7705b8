#!/usr/bin/env bash
# Installs every Debian package the project needs to build, test and run, and
# LibTorch: the pinned PyTorch wheel from PyPI in the project's .venv (or
# $GRPO_VENV), which CMake finds with no flags and the benchmarks' peer runs on,
# with the reference libraries the tests use as oracles. `--peers` adds TRL and
# ms-swift, the programs bench/peers runs beside grpo-host.
# Idempotent: only what is missing is installed, so a second run is a no-op.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  libgloo-dev                         # Gloo headers for c10d (the wheel ships gloo's library, not its headers)
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

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all packages present"
fi

# torch 2.11.0: PyPI's Linux wheel of that release is built for CUDA 13.0 (the
# toolkit here) and is the release on the GPU machine (2.11.0+cu130), so the
# LibTorch tested here is the one GPU users run. It runs on the CPU without a
# GPU; its CUDA libraries come as nvidia-* wheels beside it.
TORCH_PIN="2.11.0"
VENV="${GRPO_VENV:-$(cd "$(dirname "$0")/.." && pwd)/.venv}"
if "$VENV/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_PIN')" 2>/dev/null; then
  echo "setup: torch $TORCH_PIN present in $VENV"
else
  echo "setup: installing torch==$TORCH_PIN into $VENV"
  if ! python3 -m venv "$VENV" 2>/dev/null; then
    $SUDO apt-get install -y -qq --no-install-recommends python3-venv
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "torch==$TORCH_PIN"
fi

# The reference libraries the tests run as live oracles and file writers,
# pinned so a verdict changes only when we change a pin: DuckDB and pyarrow
# write Parquet files, transformers and peft load checkpoints and compute
# logits, math-verify judges answers, tokenizers trains BPE, jinja2 renders
# chat templates.
PYPI_PINS=("duckdb==2.0.1" "pyarrow==26.0.1" "transformers==5.25.0" "peft==0.21.2"
           "safetensors==0.8.0" "math-verify==0.9.0" "tokenizers==0.23.3" "jinja2==3.1.6")
# True when every "name==version" in $@ is installed in the venv at $1.
pins_present() {
  local venv="$1"; shift
  "$venv/bin/python" - "$@" <<'PY' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
try:
    sys.exit(any(version(p.split("==")[0]) != p.split("==")[1] for p in sys.argv[1:]))
except PackageNotFoundError:
    sys.exit(1)
PY
}
install_pins() {
  local venv="$1"; shift
  if pins_present "$venv" "$@"; then
    echo "setup: $* present in $venv"
  else
    echo "setup: installing $* into $venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "$@"
  fi
}
install_pins "$VENV" "${PYPI_PINS[@]}"

# --peers: the programs users compare us with, for bench/peers. TRL goes into
# the project's venv beside the oracles. ms-swift 4.6 pins transformers < 5.20,
# trl 0.29 and peft 0.20, which conflict with the oracles' pins, so it gets a
# venv of its own ($GRPO_SWIFT_VENV, default .venv-swift). Its GRPO trainer imports msgspec, which
# its package does not require.
if [[ " $* " == *" --peers "* ]]; then
  install_pins "$VENV" "trl==1.16.0"
  SWIFT_VENV="${GRPO_SWIFT_VENV:-$(dirname "$VENV")/.venv-swift}"
  [ -x "$SWIFT_VENV/bin/pip" ] || python3 -m venv "$SWIFT_VENV"
  install_pins "$SWIFT_VENV" "torch==$TORCH_PIN" "ms-swift==4.6.0" "math-verify==0.9.0" "msgspec==0.23.0"
fi
