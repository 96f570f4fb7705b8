#!/usr/bin/env bash
# Installs, builds, and trains a small model from scratch on this machine
# (no GPU, no network): init-model -> sft warm start on additions demonstrated
# by an unreliable teacher -> GRPO with the accuracy and format reward plugins ->
# a before/after table on held-out prompts (configs/quickstart/make_data.py).
#
# --tools: the tool-use demo instead: init-model with a tokenizer trained on the
# demo's text -> sft on products, a third of them answered with the calculator
# tool -> multi-turn GRPO with the calculator -> held-out accuracy and tool calls
# before and after (configs/tools/make_data.py).
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-}
if [[ -n "$MODE" && "$MODE" != --tools ]]; then
  echo "usage: scripts/quickstart.sh [--tools]" >&2
  exit 2
fi
bash scripts/setup.sh
TARGETS=grpo_runtime bash scripts/build.sh  # the trainer and its plugins; tests and benchmarks are not needed here
HOST=./build/bin/grpo-host
if [[ "$MODE" == --tools ]]; then
  exec bash scripts/quickstart_tools.sh
fi
OUT=output/quickstart
rm -rf "$OUT"
start=$(date +%s)

$HOST init-model --arch qwen2 --preset small --out "$OUT/init" --seed 1
$HOST sft --config configs/quickstart/sft.yaml
$HOST train --config configs/quickstart/grpo.yaml
train_s=$(( $(date +%s) - start ))

evaluate() {  # prints: accuracy format mean_length
  $HOST evaluate --model "$1" --dataset "$2" --reward_funcs accuracy format \
    --max_completion_length 64 2>/dev/null |
    awk '/^  accuracy/{a=$2} /^  format/{f=$2} /mean length/{l=$4} END{print a, f, l}'
}
read -r acc0 fmt0 len0 < <(evaluate "$OUT/sft/checkpoint-600" configs/quickstart/test.jsonl)
read -r acc1 fmt1 len1 < <(evaluate "$OUT/grpo/checkpoint-60" configs/quickstart/test.jsonl)
read -r teach0 _ _ < <(evaluate "$OUT/sft/checkpoint-600" configs/quickstart/test_teacher.jsonl)
read -r teach1 _ _ < <(evaluate "$OUT/grpo/checkpoint-60" configs/quickstart/test_teacher.jsonl)

echo
echo "Held-out prompts (configs/quickstart/test.jsonl, 36 additions GRPO never saw, greedy):"
printf '%-34s %10s %10s\n' "" "after sft" "after grpo"
printf '%-34s %10s %10s\n' "accuracy (reward)" "$acc0" "$acc1"
printf '%-34s %10s %10s\n' "teacher's mistake (sum + 1)" "$teach0" "$teach1"
printf '%-34s %10s %10s\n' "format rate (reward)" "$fmt0" "$fmt1"
printf '%-34s %10s %10s\n' "mean length (tokens)" "$len0" "$len1"
sampled_accuracy() {  # the accuracy reward of GRPO's sampled completions at a logged step
  grep -o '"rewards/accuracy/mean":[0-9.e-]*' "$OUT/grpo/logging.jsonl" | sed -n "$1" | cut -d: -f2 | xargs printf '%.2f'
}
echo "GRPO's sampled completions (temperature 1): accuracy reward $(sampled_accuracy 1p) at step 10, $(sampled_accuracy '$p') at step 60"
echo "training (init + sft + grpo): ${train_s} s; logs in $OUT/grpo/logging.jsonl, completions in $OUT/grpo/completions.jsonl"
