#!/usr/bin/env bash
# The tool-use demo of `scripts/quickstart.sh --tools` (which installs and
# builds first): a small model learns to call the calculator tool with GRPO.
set -euo pipefail
cd "$(dirname "$0")/.."
HOST=./build/bin/grpo-host
OUT=output/tools
rm -rf "$OUT"
start=$(date +%s)

# The demo's tokenizer learns its merges from the sft text, so that the tool
# call's fixed JSON is a few tokens, not a hundred bytes: a 3M model learns to
# copy numbers across that distance within minutes.
$HOST init-model --arch qwen2 --preset small --out "$OUT/init" --seed 1 \
  --train_tokenizer configs/tools/sft.jsonl --vocab_size 512
$HOST sft --config configs/tools/sft.yaml
sft_s=$(( $(date +%s) - start ))
$HOST train --config configs/tools/grpo.yaml
train_s=$(( $(date +%s) - start ))

evaluate() {  # prints: accuracy calls_per_rollout turns
  $HOST evaluate --model "$1" --dataset configs/tools/test.jsonl --reward_funcs accuracy \
    --multi_turn_scheduler calculator --max_turns 3 --plugin_args '{"calculator": {"describe_tools": false}}' \
    --max_completion_length 96 ${2:-} 2>/dev/null |
    awk '/^  accuracy/{a=$2} /tool calls\/rollout/{c=$3} /turns \(mean\)/{t=$3} END{print a, c, t}'
}
read -r acc0 calls0 turns0 < <(evaluate "$OUT/sft/checkpoint-600")
read -r acc1 calls1 turns1 < <(evaluate "$OUT/grpo/checkpoint-40")
read -r sacc0 scalls0 _ < <(evaluate "$OUT/sft/checkpoint-600" --sample)
read -r sacc1 scalls1 _ < <(evaluate "$OUT/grpo/checkpoint-40" --sample)

echo
echo "Held-out products (configs/tools/test.jsonl, 64 questions neither sft nor GRPO saw):"
printf '%-34s %10s %10s\n' "" "after sft" "after grpo"
printf '%-34s %10s %10s\n' "accuracy, greedy" "$acc0" "$acc1"
printf '%-34s %10s %10s\n' "tool calls per question, greedy" "$calls0" "$calls1"
printf '%-34s %10s %10s\n' "turns per question, greedy" "$turns0" "$turns1"
printf '%-34s %10s %10s\n' "accuracy, sampled (temperature 1)" "$sacc0" "$sacc1"
printf '%-34s %10s %10s\n' "tool calls, sampled" "$scalls0" "$scalls1"
echo "training: init + sft $sft_s s, with grpo ${train_s} s; logs in $OUT/grpo/logging.jsonl, completions in $OUT/grpo/completions.jsonl"
