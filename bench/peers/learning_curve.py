"""grpo-host against TRL's GRPOTrainer on one learning task, several seeds each, in one run.

The task is the quickstart's GRPO stage: the sft checkpoint (a Hugging Face
checkpoint with its tokenizer and chat template) learns single-digit additions
from the accuracy and format rewards. Both trainers get the same model, rows,
G, batch, learning rate, beta, loss type, optimizer settings and steps, and
log every step. Prints, per window of steps, the mean accuracy reward of each
trainer over the seeds and TRL's spread (min..max over its seeds), then the
median seconds per step and the ratio.

Run (after scripts/quickstart.sh, with scripts/setup.sh --peers):
  .venv/bin/python bench/peers/learning_curve.py --model output/quickstart/sft/checkpoint-600
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# The quickstart's GRPO settings (configs/quickstart/grpo.yaml), written out so TRL gets the same values.
# weight_decay and adam_beta2 are ms-swift's defaults, which grpo-host keeps and transformers does not.
SETTINGS = {"num_generations": 8, "per_device_train_batch_size": 16, "gradient_accumulation_steps": 2,
            "max_completion_length": 64, "learning_rate": 5e-5, "beta": 0.02, "loss_type": "grpo",
            "temperature": 1.0, "weight_decay": 0.1, "adam_beta2": 0.95, "max_grad_norm": 1.0}


def read_steps(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def run_ours(a, seed, out):
    cmd = [a.grpo_host, "train", "--config", os.path.join(ROOT, "configs/quickstart/grpo.yaml"),
           "--model", a.model, "--dataset", a.dataset, "--seed", str(seed), "--max_steps", str(a.steps),
           "--logging_steps", "1", "--log_completions", "false", "--save_steps", str(10 * a.steps),
           "--output_dir", out, "--report_to", "none"]
    for k, v in SETTINGS.items():
        cmd += ["--" + k, str(v)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env=dict(os.environ, OMP_NUM_THREADS=str(a.threads)))
    rows = [r for r in read_steps(os.path.join(out, "logging.jsonl")) if "rewards/accuracy/mean" in r]
    return [(r["rewards/accuracy/mean"], r["step_time"]) for r in rows]


def run_trl(a, seed, out):
    log = out + ".jsonl"
    cmd = [sys.executable, os.path.join(HERE, "trl_grpo.py"), "--model", a.model, "--dataset", a.dataset,
           "--output_dir", out, "--log", log, "--seed", str(seed), "--max_steps", str(a.steps),
           "--threads", str(a.threads)]
    for k, v in SETTINGS.items():
        cmd += ["--" + k, str(v)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return [(r["rewards/accuracy/mean"], r["step_s"]) for r in read_steps(log)]


def task_arguments():
    """The task's model, rows, seeds and our binary: the flags every program of bench/peers takes."""
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--dataset", default=os.path.join(ROOT, "configs/quickstart/train.jsonl"))
    p.add_argument("--grpo_host", default=os.path.join(ROOT, "build/bin/grpo-host"))
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    return p


def main():
    p = task_arguments()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--out", default=os.path.join(ROOT, "output/peers/learning_curve"))
    a = p.parse_args()
    ours, trl = {}, {}
    for seed in a.seeds:  # alternated, so a slower stretch of the machine falls on both
        start = time.perf_counter()
        ours[seed] = run_ours(a, seed, os.path.join(a.out, f"grpo-{seed}"))
        print(f"seed {seed}: grpo-host {time.perf_counter() - start:.0f} s", file=sys.stderr)
        start = time.perf_counter()
        trl[seed] = run_trl(a, seed, os.path.join(a.out, f"trl-{seed}"))
        print(f"seed {seed}: TRL {time.perf_counter() - start:.0f} s", file=sys.stderr)
    for name, runs in (("grpo-host", ours), ("TRL", trl)):
        short = [s for s, r in runs.items() if len(r) != a.steps]
        if short:
            sys.exit(f"{name} logged fewer than {a.steps} steps for seeds {short}")

    def window_means(run):
        return [statistics.fmean(acc for acc, _ in run[i:i + a.window]) for i in range(0, a.steps, a.window)]

    ours_w = {s: window_means(r) for s, r in ours.items()}
    trl_w = {s: window_means(r) for s, r in trl.items()}
    print(f"accuracy reward of the sampled completions, mean over steps in each window, {len(a.seeds)} seeds")
    print("| steps | grpo-host mean (min..max) | TRL mean (min..max) | grpo-host within or above TRL's spread |")
    print("|---|---|---|---|")
    for w in range(a.steps // a.window):
        o = [ours_w[s][w] for s in a.seeds]
        t = [trl_w[s][w] for s in a.seeds]
        print(f"| {w * a.window + 1}-{(w + 1) * a.window} | {statistics.fmean(o):.3f} ({min(o):.3f}..{max(o):.3f}) "
              f"| {statistics.fmean(t):.3f} ({min(t):.3f}..{max(t):.3f}) "
              f"| {'yes' if statistics.fmean(o) >= min(t) else 'no'} |")
    # The first step pays for loading and first-call costs in both; the median leaves it out.
    ours_s = statistics.median(s for r in ours.values() for _, s in r)
    trl_s = statistics.median(s for r in trl.values() for _, s in r)
    print(f"\nseconds per step (median over {a.steps} steps x {len(a.seeds)} seeds, {a.threads} threads): "
          f"grpo-host {ours_s:.3f}, TRL {trl_s:.3f}, grpo-host is {trl_s / ours_s:.1f}x TRL's speed")


if __name__ == "__main__":
    main()
