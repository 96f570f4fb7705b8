"""TRL's GRPOTrainer on the task grpo-host trains in bench/peers/learning_curve.py.

Same model directory (a Hugging Face checkpoint), same JSONL rows (`problem`,
`solution`), the rewards as ms-swift defines `accuracy` (Math-Verify) and
`format`, and the hyper-parameters given on the command line under their
TRL/transformers names. Writes one JSON line per optimizer step to --log:
{"step", "reward", "rewards/<name>/mean", "step_s"}.
"""
import argparse
import json
import re
import time

import torch
from datasets import Dataset
from latex2sympy2_extended import NormalizationConfig
from math_verify import LatexExtractionConfig, parse, verify
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import GRPOConfig, GRPOTrainer


def completion_text(completion):
    # Conversational prompts give completions as [{"role": "assistant", "content": ...}].
    return completion[0]["content"] if isinstance(completion, list) else completion


def accuracy(completions, solution, **_):
    """ms-swift's MathAccuracy: the gold answer parsed first; unparseable gold scores 0."""
    rewards = []
    for completion, sol in zip(completions, solution):
        gold = parse(sol, extraction_mode="first_match")
        if not gold:
            rewards.append(0.0)
            continue
        answer = parse(
            completion_text(completion),
            extraction_config=[LatexExtractionConfig(
                normalization_config=NormalizationConfig(nits=False, malformed_operators=False, basic_latex=True,
                                                         equations=True, boxed=True, units=True),
                boxed_match_priority=0, try_extract_without_anchor=False)],
            extraction_mode="first_match")
        try:
            rewards.append(float(verify(gold, answer)))
        except Exception:
            rewards.append(0.0)
    return rewards


FORMAT = re.compile(r"^<think>.*?</think>\s*<answer>.*?</answer>(?![\s\S])", re.DOTALL | re.MULTILINE)


def format(completions, **_):  # noqa: A001 - the reward's name as ms-swift spells it
    return [1.0 if FORMAT.match(completion_text(c)) else 0.0 for c in completions]


class StepLog(TrainerCallback):
    """One line per optimizer step: TRL's own logged metrics and the step's wall time."""

    def __init__(self, path):
        self.out = open(path, "w", encoding="utf-8")
        self.last = None

    def on_step_begin(self, args, state, control, **_):
        self.last = self.last or time.perf_counter()

    def on_log(self, args, state, control, logs=None, **_):
        if not logs or "reward" not in logs:
            return
        now = time.perf_counter()
        row = {"step": state.global_step, "reward": logs["reward"], "step_s": now - self.last}
        row.update({k: v for k, v in logs.items() if k.startswith("rewards/") and k.endswith("/mean")})
        self.out.write(json.dumps(row) + "\n")
        self.out.flush()
        self.last = now


def main():
    p = argparse.ArgumentParser()
    for name, kind in [("model", str), ("dataset", str), ("output_dir", str), ("log", str), ("seed", int),
                       ("num_generations", int), ("per_device_train_batch_size", int),
                       ("gradient_accumulation_steps", int), ("max_completion_length", int),
                       ("max_steps", int), ("learning_rate", float), ("beta", float), ("loss_type", str),
                       ("temperature", float), ("weight_decay", float), ("adam_beta2", float),
                       ("max_grad_norm", float), ("threads", int)]:
        p.add_argument("--" + name, type=kind, required=True)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    with open(a.dataset, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    data = Dataset.from_list([{"prompt": [{"role": "user", "content": r["problem"]}], "solution": r["solution"]}
                              for r in rows])
    tokenizer = AutoTokenizer.from_pretrained(a.model)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    config = GRPOConfig(
        output_dir=a.output_dir, seed=a.seed, use_cpu=True, bf16=False, report_to=[], save_strategy="no",
        logging_steps=1, num_generations=a.num_generations, per_device_train_batch_size=a.per_device_train_batch_size,
        gradient_accumulation_steps=a.gradient_accumulation_steps, max_completion_length=a.max_completion_length,
        max_steps=a.max_steps, learning_rate=a.learning_rate, lr_scheduler_type="constant", warmup_steps=0,
        beta=a.beta, loss_type=a.loss_type, temperature=a.temperature, top_p=1.0, top_k=0,
        weight_decay=a.weight_decay, adam_beta1=0.9, adam_beta2=a.adam_beta2, max_grad_norm=a.max_grad_norm,
        scale_rewards="group", num_iterations=1, epsilon=0.2, dataloader_num_workers=0)
    trainer = GRPOTrainer(model=model, processing_class=tokenizer, reward_funcs=[accuracy, format],
                          args=config, train_dataset=data, callbacks=[StepLog(a.log)])
    trainer.train()


if __name__ == "__main__":
    main()
