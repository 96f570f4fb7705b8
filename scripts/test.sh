#!/usr/bin/env bash
# Installs what is missing, builds, and runs the test suite (ctest).
# Extra arguments go to ctest, e.g. scripts/test.sh -L fast -R Accuracy
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" -LE gpu "$@"
