#!/usr/bin/env bash
# On the GPU machine: build against the PyTorch wheel's LibTorch (2.x, CUDA),
# run the `gpu`-labelled tests and the benchmarks in bfloat16 — one call,
# under 10 minutes. Needs no network: Debian packages the build uses must
# already be there (scripts/setup.sh installs what is missing when it can).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-check-out}"
mkdir -p "$OUT"

if ! command -v cmake >/dev/null || ! dpkg -s libyaml-cpp-dev >/dev/null 2>&1; then
  bash scripts/setup.sh || echo "gpu-check: setup could not install everything; trying the build anyway"
fi
TORCH_PREFIX="$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0))' \
  | tee "$OUT/device.txt"

BUILD_DIR="${BUILD_DIR:-build-gpu}"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$TORCH_PREFIX" \
  -DCMAKE_CUDA_ARCHITECTURES=90 2>&1 | tail -20 | tee "$OUT/configure.log"
cmake --build "$BUILD_DIR" -j "$(nproc)" 2>&1 | tail -40 | tee "$OUT/build.log"

# GPU tests, then the whole suite (it must pass against LibTorch 2.x as well).
(cd "$BUILD_DIR" && ctest -L gpu --output-on-failure 2>&1 | tee "$OUT/ctest-gpu.log")
(cd "$BUILD_DIR" && ctest -LE gpu -j "$(nproc)" --output-on-failure 2>&1 | tail -30 | tee "$OUT/ctest.log")

# Benchmarks.
"$BUILD_DIR/bin/bench_engine" --dtype bfloat16 --device cuda 2>&1 | tee "$OUT/bench_engine.txt" || true
"$BUILD_DIR/bin/bench_rewards" --n 4000 2>&1 | tee "$OUT/bench_rewards.txt" || true
"$BUILD_DIR/bin/bench_tokenizer" 2>&1 | tee "$OUT/bench_tokenizer.txt" || true
echo "gpu-check: results in $OUT"
