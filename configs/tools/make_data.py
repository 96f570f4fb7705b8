#!/usr/bin/env python3
"""Writes the tool demo's data (sft.jsonl, train.jsonl, test.jsonl) next to this file.

The task is a 3-digit by 2-digit product with a 5-digit result (300..999 x
34..99): too hard for a 3M-parameter model to compute in its head, easy with
the calculator tool.

The sft demonstrations warm-start the model with two behaviours:
- 35% of the questions are answered with the tool: the call in the format
  Qwen2.5's template describes, then the tool's result copied into \\boxed{}.
  Each such conversation gives one row for the call and, because sft learns
  a row's last assistant turn, rows for the answer after the tool's message
  (ANSWER_COPIES of them: copying the result is the harder skill to learn).
- 65% are answered in the head, with the product rounded to hundreds: a
  guess that is nearly always wrong.
So the warm-started model guesses when decoding greedily, and calls the tool
in about a third of its samples; GRPO with the accuracy reward has to make
the tool the habit.

The 64 held-out questions (test.jsonl) appear in neither sft.jsonl nor
train.jsonl (the prompts GRPO trains on).

Run `python3 configs/tools/make_data.py` to regenerate; the output is
deterministic.
"""
import json
import os
import random

TOOL_SHARE = 0.35
SFT_ROWS = 1600
ANSWER_COPIES = 3
TRAIN_PROMPTS = 400
HELD_OUT = 64


def question(a, b):
    return f"What is {a} * {b}?"


def tool_call(a, b):
    call = {"name": "calculator", "arguments": {"expression": f"{a} * {b}"}}
    return "<tool_call>\n" + json.dumps(call) + "\n</tool_call>"


def write_jsonl(path, rows):
    with open(path, "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    rng = random.Random(11)
    pairs = set()
    while len(pairs) < HELD_OUT + TRAIN_PROMPTS:
        pairs.add((rng.randint(300, 999), rng.randint(34, 99)))
    pairs = sorted(pairs)
    rng.shuffle(pairs)
    test, train = pairs[:HELD_OUT], pairs[HELD_OUT:]
    held_out = set(test)

    sft = []
    while len(sft) < SFT_ROWS:
        a, b = rng.randint(300, 999), rng.randint(34, 99)
        if (a, b) in held_out:
            continue
        user = {"role": "user", "content": question(a, b)}
        if rng.random() < TOOL_SHARE:
            call = {"role": "assistant", "content": tool_call(a, b)}
            result = {"role": "tool", "content": str(a * b)}
            answer = {"role": "assistant", "content": f"\\boxed{{{a * b}}}"}
            sft.append({"messages": [user, call]})
            sft.extend({"messages": [user, call, result, answer]} for _ in range(ANSWER_COPIES))
        else:
            sft.append({"messages": [user, {"role": "assistant", "content": f"\\boxed{{{round(a * b, -2)}}}"}]})
    rng.shuffle(sft)
    write_jsonl(os.path.join(here, "sft.jsonl"), sft)
    for name, split in (("train", train), ("test", test)):
        write_jsonl(os.path.join(here, name + ".jsonl"),
                    [{"problem": question(a, b), "solution": str(a * b)} for a, b in split])


if __name__ == "__main__":
    main()
