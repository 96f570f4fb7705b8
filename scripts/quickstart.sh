#!/usr/bin/env bash
# Installs, builds, and runs the main job on a bundled sample: scoring logged
# completions with the built-in accuracy and format rewards.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
./build/bin/grpo-host plugins
echo
./build/bin/grpo-host score --config configs/score_sample.yaml \
  --completions configs/sample/completions.jsonl \
  --output output/quickstart/rewards.jsonl
