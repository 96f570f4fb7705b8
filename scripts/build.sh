#!/usr/bin/env bash
# Configures and builds into build/ (Ninja and ccache when present).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${BUILD_DIR:-build}"
GEN=()
if command -v ninja >/dev/null 2>&1; then GEN=(-G Ninja); fi
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD_DIR" "${GEN[@]}" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "$@"
fi
# TARGETS (e.g. grpo_runtime) limits the build to those targets.
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" ${TARGETS:+--target $TARGETS}
