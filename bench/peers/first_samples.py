"""Do grpo-host's sampler and transformers' generate (what TRL's GRPOTrainer samples with) draw
from the same distribution? Both sample the learning-curve task's model, before any update, on every
training prompt `--repeats` times per seed, and the accuracy reward of the samples is compared:
a gap larger than the seeds' spread would move the learning curves apart from the first step.

  .venv/bin/python bench/peers/first_samples.py --model output/quickstart/sft/checkpoint-600
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from learning_curve import task_arguments  # noqa: E402
from trl_grpo import accuracy  # noqa: E402  the reward TRL's run scores with


def ours(a, rows_path, seed):
    out = subprocess.run([a.grpo_host, "evaluate", "--model", a.model, "--dataset", rows_path, "--sample",
                          "--reward_funcs", "accuracy", "--temperature", "1.0", "--top_k", "0", "--top_p", "1.0",
                          "--max_completion_length", "64", "--seed", str(seed)],
                         check=True, capture_output=True, text=True).stdout
    return float(re.search(r"^  accuracy\s+([0-9.]+)", out, re.M).group(1))


def transformers_generate(a, rows, seed):
    torch.manual_seed(seed)
    tok = AutoTokenizer.from_pretrained(a.model)
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    texts = [tok.apply_chat_template([{"role": "user", "content": r["problem"]}], tokenize=False,
                                     add_generation_prompt=True) for r in rows]
    completions = []
    for i in range(0, len(texts), 64):
        batch = tok(texts[i:i + 64], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            ids = model.generate(**batch, do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=64,
                                 pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
        completions += tok.batch_decode(ids[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
    return statistics.fmean(accuracy(completions, [r["solution"] for r in rows]))


def main():
    p = task_arguments()
    p.add_argument("--repeats", type=int, default=8)
    a = p.parse_args()
    torch.set_num_threads(os.cpu_count())
    with open(a.dataset, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()] * a.repeats
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    ours_acc = [ours(a, f.name, s) for s in a.seeds]
    theirs_acc = [transformers_generate(a, rows, s) for s in a.seeds]
    os.unlink(f.name)
    print(f"accuracy reward of {len(rows)} samples per seed, before any update (seeds {a.seeds}):")
    print(f"  grpo-host sampler         {statistics.fmean(ours_acc):.3f}  per seed {[round(x, 3) for x in ours_acc]}")
    print(f"  transformers generate     {statistics.fmean(theirs_acc):.3f}  per seed {[round(x, 3) for x in theirs_acc]}")


if __name__ == "__main__":
    main()
