"""Completion/solution pairs for the accuracy reward, judged by Math-Verify.

Writes JSON {"reference", "seed", "cases": [{category, completion, solution,
reward}]} to the path given. The pairs are drawn from a seeded generator, so a
run with the same seed and the same Math-Verify writes the same file; the
verdicts come from the installed Math-Verify, called as ms-swift's `accuracy`
reward (swift/plugin/orm.py, MathAccuracy) calls it, so the C++ reward is
checked against the library itself rather than against remembered values.

Exit status 2 (with a message naming scripts/setup.sh) when Math-Verify is
missing or is not the version scripts/setup.sh pins.
"""
import argparse
import json
import logging
import multiprocessing
import os
import pathlib
import random
import re
import sys

from math_verify_forms import Forms

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pinned_version():
    """The math-verify version scripts/setup.sh installs: the one pin to follow."""
    text = (ROOT / "scripts" / "setup.sh").read_text()
    found = re.search(r'"math-verify==([0-9.]+)"', text)
    return found.group(1) if found else None


def load_math_verify():
    want = pinned_version()
    try:
        from importlib.metadata import version
        have = version("math-verify")
        from latex2sympy2_extended import NormalizationConfig
        from math_verify import LatexExtractionConfig, parse, verify
    except Exception as e:  # ImportError, PackageNotFoundError
        sys.exit(f"math-verify is not importable from {sys.executable} ({e}); "
                 "run scripts/setup.sh, which installs the pinned reference libraries")
    if want and have != want:
        sys.exit(f"math-verify {have} is installed in {sys.executable} but scripts/setup.sh pins {want}; "
                 "run scripts/setup.sh")
    # ms-swift's equations=True is deprecated in latex2sympy2_extended, which
    # says so on every call; the option still acts, so only the message goes.
    logging.getLogger("latex2sympy2_extended").setLevel(logging.ERROR)
    return have, NormalizationConfig, LatexExtractionConfig, parse, verify


_judge = None


def _init_worker():
    global _judge
    _judge = make_judge(*load_math_verify()[1:])


def _judge_case(case):
    return _judge(case.completion, case.solution)


def make_judge(NormalizationConfig, LatexExtractionConfig, parse, verify):
    # The call ms-swift makes: a gold that parses to nothing scores 0 whatever the
    # completion; the completion is read as LaTeX only, \boxed first, anchored.
    pred_config = [LatexExtractionConfig(
        normalization_config=NormalizationConfig(nits=False, malformed_operators=False, basic_latex=True,
                                                 equations=True, boxed=True, units=True),
        boxed_match_priority=0, try_extract_without_anchor=False)]

    def judge(completion, solution):
        gold = parse(solution, extraction_mode="first_match")
        if len(gold) == 0:
            return 0.0
        answer = parse(completion, extraction_config=pred_config, extraction_mode="first_match")
        try:
            return float(verify(gold, answer))
        except Exception:
            return 0.0

    return judge


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("output", help="where to write the JSON")
    ap.add_argument("--seed", type=int, default=20250101)
    ap.add_argument("--count", type=int, default=2400, help="distinct pairs to generate")
    ap.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1),
                    help="worker processes; each verdict depends only on its own pair")
    args = ap.parse_args()

    have = load_math_verify()[0]
    cases = Forms(random.Random(args.seed)).cases(args.count)
    # Processes, not threads: Math-Verify's timeouts use SIGALRM, which only a
    # process's main thread can take.
    with multiprocessing.Pool(args.jobs, initializer=_init_worker) as pool:
        rewards = pool.map(_judge_case, cases, chunksize=25)
    out = [{"category": c.category, "completion": c.completion, "solution": c.solution, "reward": r}
           for c, r in zip(cases, rewards)]
    doc = {"reference": f"Hugging Face Math-Verify {have} called as ms-swift's accuracy reward does",
           "seed": args.seed, "cases": out}
    pathlib.Path(args.output).write_text(json.dumps(doc, ensure_ascii=False, indent=0))
    print(f"{len(out)} cases, {sum(rewards):.0f} judged correct, written to {args.output}")


if __name__ == "__main__":
    main()
