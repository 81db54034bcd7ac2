"""bench/drain_inproc.py's `--callgrind`: the same run under valgrind's callgrind, one dump per measured turn, and
the instructions of each kind's turns read from the dumps (see drain_inproc's docstring)."""

from __future__ import annotations

import argparse
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CALLGRIND = "DRAIN_INPROC_CALLGRIND"  # set in the child run under valgrind: its dumps' directory


def control(*args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(os.getpid())], capture_output=True, check=True)


def run(args: argparse.Namespace, script: str) -> None:
    """Run this script under callgrind (collection off but around each measured turn, one dump per
    turn) and print the median instructions of a turn of each kind and their ratio."""
    with tempfile.TemporaryDirectory() as out:
        cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}/cg.%p"]
        cmd += [sys.executable, script, "--turns", str(args.turns), "--tree", args.tree]
        cmd += ["--only", args.only] if args.only else []
        cmd += ["--alternate"] if args.alternate else []
        # Nothing that depends on the clock, which runs ~50x slower under valgrind: string hashes fixed,
        # no lease renewal during a turn, the "running" status riding with the first event as it does.
        env = {**os.environ, CALLGRIND: out, "PYTHONHASHSEED": "0", "ADKWEB_SESSION_LEASE_SECONDS": "3600"}
        run = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if run.returncode:
            sys.exit(run.stdout[-2000:] + run.stderr[-3000:])
        print(run.stdout, end="")
        counts: dict[str, list[int]] = {}
        by_turn: dict[str, dict[int, int]] = {}
        for path in glob.glob(f"{out}/cg.*.*"):  # one file per dump: cg.<pid>.<n>
            text = Path(path).read_text(errors="replace")
            dump = re.search(r"^desc: Trigger: dump ([a-z]+)(\d+)", text, re.M)
            total = re.search(r"^totals: (\d+)", text, re.M)
            if dump and total:
                counts.setdefault(dump.group(1), []).append(int(total.group(1)))
                by_turn.setdefault(dump.group(1), {})[int(dump.group(2))] = int(total.group(1))
    medians = {k: statistics.median(v) for k, v in counts.items()}
    for kind, n in medians.items():
        spread = f"{min(counts[kind]) / 1e6:.1f}-{max(counts[kind]) / 1e6:.1f}"
        mean = statistics.mean(counts[kind]) / 1e6
        print(
            f"  {kind:<7} median {n / 1e6:8.2f}, mean {mean:8.2f} M instructions a turn "
            f"(range {spread}, {len(counts[kind])} turns)"
        )
    if "drain" in medians and "direct" in medians:
        means = {k: statistics.mean(v) for k, v in counts.items()}
        print(
            f"  drain / direct: instructions {medians['drain'] / medians['direct']:.3f}x median, "
            f"{means['drain'] / means['direct']:.3f}x mean (user space only: not the kernel's side of a round trip)"
        )
        # The same turn index on both sides (sessions of the same length): the drain's extra, turn by turn; its
        # median moves less between runs than the ratio of medians taken over turns of different lengths.
        extra = sorted((n - by_turn["direct"][i]) / 1e6 for i, n in by_turn["drain"].items() if i in by_turn["direct"])
        print(
            f"  drain - direct of the same turn: median {statistics.median(extra):.2f} M instructions "
            f"(range {extra[0]:.2f}-{extra[-1]:.2f}, {len(extra)} turns)"
        )
