#!/usr/bin/env python3
"""Writes the quickstart's data (sft.jsonl, train.jsonl, test.jsonl, test_teacher.jsonl)
next to this file.

The task is single-digit addition. The sft demonstrations come from an unreliable
teacher: 35% of its answers are right and the rest are one too high, so a model
that imitates it answers wrongly when decoding greedily. GRPO, scored by the
accuracy reward against the true sums, has to move the model past its teacher.

The 100 sums are split once: 64 prompts for GRPO (train.jsonl) and 36 held out
(test.jsonl), never seen by GRPO. The sft demonstrations cover all 100, half of
them in the <think>/<answer> format and half in free text.

Run `python3 configs/quickstart/make_data.py` to regenerate; the output is
deterministic.
"""
import json
import os
import random

TEACHER_RIGHT = 0.35
SFT_EXAMPLES = 4000
HELD_OUT = 36


def question(a, b):
    return f"What is {a} + {b}?"


def demonstration(a, b, c, formatted):
    if formatted:
        return f"<think>{a} + {b} = {c}</think>\n<answer>\\boxed{{{c}}}</answer>"
    return f"{a} + {b} = {c}, so the answer is \\boxed{{{c}}}."


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(7)
    pairs = [(a, b) for a in range(10) for b in range(10)]
    rng.shuffle(pairs)
    test, train = pairs[:HELD_OUT], pairs[HELD_OUT:]

    sft = []
    for _ in range(SFT_EXAMPLES):
        a, b = rng.choice(pairs)
        c = a + b if rng.random() < TEACHER_RIGHT else a + b + 1
        answer = demonstration(a, b, c, rng.random() < 0.5)
        sft.append({"messages": [{"role": "user", "content": question(a, b)},
                                 {"role": "assistant", "content": answer}]})
    write_jsonl(os.path.join(here, "sft.jsonl"), sft)
    for name, split in (("train", train), ("test", test)):
        write_jsonl(os.path.join(here, name + ".jsonl"),
                    [{"problem": question(a, b), "solution": str(a + b)} for a, b in split])
    # The held-out prompts scored against the teacher's mistake: how often a model
    # still answers as its teacher would.
    write_jsonl(os.path.join(here, "test_teacher.jsonl"),
                [{"problem": question(a, b), "solution": str(a + b + 1)} for a, b in test])


if __name__ == "__main__":
    main()
