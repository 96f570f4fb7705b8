"""Which of ms-swift's `swift rlhf` flags grpo-host accepts, refuses or does not know, and defaults that differ.

Reads ms-swift's own argument dataclass (RLHFArguments, the class `swift rlhf`
parses into) and grpo-host's flag table (`grpo-host --help`), and prints the
markdown tables docs/migrating.md is written from. Run with ms-swift's venv
(scripts/setup.sh --peers):
  .venv-swift/bin/python bench/peers/flag_table.py build/bin/grpo-host
"""
import dataclasses
import re
import subprocess
import sys

from swift.arguments import RLHFArguments

FLAG = re.compile(r"^  --(\w+) ?(\S*)\s+(.*)$")


def ours(host):
    """{name: (default text or None, refused reason or None)} from grpo-host --help, aliases included."""
    text = subprocess.run([host, "--help"], check=True, capture_output=True, text=True).stdout
    flags = {}
    for line in text.splitlines():
        m = FLAG.match(line)
        if not m:
            continue
        name, desc = m.group(1), m.group(3)
        refused = desc[len("refused: "):] if desc.startswith("refused: ") else None
        d = re.search(r"\(default: ([^;]*?)(; also --(\w+))?\)$", desc)
        default = d.group(1) if d else None
        flags[name] = (default, refused)
        for alias in re.findall(r"also --(\w+)", desc):
            flags[alias] = (default, refused)
    return flags


def swift_fields():
    out = {}
    for f in dataclasses.fields(RLHFArguments):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = None
        out[f.name] = default
    return out


def same(swift_default, our_default):
    if our_default is None:
        return swift_default in (None, [], "")
    s = str(swift_default).lower().replace("'", "")
    o = our_default.lower().replace("[", "").replace("]", "").replace("'", "")
    try:
        return float(s) == float(o)
    except ValueError:
        return s.strip("[]") == o or (s == "none" and o in ("", "null"))


def main():
    host = sys.argv[1] if len(sys.argv) > 1 else "build/bin/grpo-host"
    mine, theirs = ours(host), swift_fields()
    accepted = [n for n in theirs if n in mine and not mine[n][1]]
    refused = [n for n in theirs if n in mine and mine[n][1]]
    unknown = [n for n in theirs if n not in mine]
    only_ours = sorted(n for n in mine if n not in theirs)
    print(f"ms-swift RLHFArguments: {len(theirs)} flags; grpo-host: {len(mine)} names (aliases included)\n")
    print(f"- accepted by grpo-host under ms-swift's name: {len(accepted)}")
    print(f"- refused by grpo-host with a reason: {len(refused)}")
    print(f"- unknown to grpo-host (an error naming the closest flag): {len(unknown)}")
    print(f"- grpo-host's own (not in ms-swift): {len(only_ours)}\n")
    print("Defaults that differ (flags both accept):\n")
    print("| flag | ms-swift 4.6 | grpo-host |\n|---|---|---|")
    for n in accepted:
        if not same(theirs[n], mine[n][0]):
            print(f"| `{n}` | `{theirs[n]}` | `{mine[n][0]}` |")
    print("\nRefused:\n")
    print("| flag | why, and what to use |\n|---|---|")
    for n in refused:
        print(f"| `{n}` | {mine[n][1]} |")
    print("\nUnknown to grpo-host:\n")
    print(", ".join(f"`{n}`" for n in unknown))
    print("\ngrpo-host's own:\n")
    print(", ".join(f"`{n}`" for n in only_ours))


if __name__ == "__main__":
    main()
