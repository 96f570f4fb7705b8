#!/usr/bin/env bash
# Installs, builds, and trains a small model from scratch on this machine
# (no GPU, no network): init-model -> sft warm start on synthetic additions ->
# GRPO with the accuracy and format reward plugins -> a before/after table on
# held-out prompts.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
TARGETS=grpo_runtime bash scripts/build.sh  # the trainer and its plugins; tests and benchmarks are not needed here
HOST=./build/bin/grpo-host
OUT=output/quickstart
rm -rf "$OUT"
start=$(date +%s)

$HOST init-model --arch qwen2 --preset small --out "$OUT/init" --seed 1
$HOST sft --config configs/quickstart/sft.yaml
$HOST train --config configs/quickstart/grpo.yaml
train_s=$(( $(date +%s) - start ))

evaluate() {  # prints: accuracy format mean_length
  $HOST evaluate --model "$1" --dataset configs/quickstart/test.jsonl --reward_funcs accuracy format \
    --max_completion_length 64 2>/dev/null |
    awk '/^  accuracy/{a=$2} /^  format/{f=$2} /mean length/{l=$4} END{print a, f, l}'
}
read -r acc0 fmt0 len0 < <(evaluate "$OUT/sft/checkpoint-300")
read -r acc1 fmt1 len1 < <(evaluate "$OUT/grpo/checkpoint-100")

echo
echo "Held-out prompts (configs/quickstart/test.jsonl, 64 additions, greedy):"
printf '%-28s %10s %10s\n' "" "after sft" "after grpo"
printf '%-28s %10s %10s\n' "accuracy (reward)" "$acc0" "$acc1"
printf '%-28s %10s %10s\n' "format rate (reward)" "$fmt0" "$fmt1"
printf '%-28s %10s %10s\n' "mean length (tokens)" "$len0" "$len1"
echo "training (init + sft + grpo): ${train_s} s; logs in $OUT/grpo/logging.jsonl, completions in $OUT/grpo/completions.jsonl"
