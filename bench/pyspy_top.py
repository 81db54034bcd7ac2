"""Read a py-spy profile (`py-spy record --format raw`, collapsed stacks) and print the functions that
hold the most samples, inclusive (anywhere on the stack) and self (on top). Not a test.

    .venv/bin/py-spy record --format raw -o /tmp/worker.txt --subprocesses -p <celery worker pid> -d 30
    .venv/bin/python bench/pyspy_top.py /tmp/worker.txt [--top 40] [--match agents_app,approvals]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]*)(?::(?P<line>\d+))?\)$")


def short(frame: str) -> str:
    """`func (path/to/site-packages/pkg/mod.py:12)` -> `pkg/mod.py:func`."""
    m = FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    path = m.group("file")
    path = re.sub(r".*/(site-packages|python3\.\d+)/", "", path)
    path = re.sub(r".*/wt-[^/]+/|.*/main/", "", path)
    return f"{path}:{m.group('func')}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--match", default="", help="comma-separated substrings; only frames matching one")
    parser.add_argument("--idle", action="store_true", help="keep idle stacks (select/epoll/wait)")
    parser.add_argument("--under", default="", help="only stacks through a frame containing this (e.g. session_drain)")
    args = parser.parse_args()
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    idle = re.compile(
        r"select|epoll|poll\b|_wait|wait_for|sleep|_recv_into|read_ready|accept|thread.py:_worker$|Condition.wait$"
    )
    for line in open(args.profile, encoding="utf-8", errors="replace"):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not count.isdigit():
            continue
        frames = [short(f) for f in stack.split(";") if f]
        if not frames:
            continue
        if not args.idle and idle.search(frames[-1]):
            continue
        if args.under and not any(args.under in f for f in frames):
            continue
        n = int(count)
        total += n
        own[frames[-1]] += n
        for f in set(frames):
            inclusive[f] += n
    wanted = [m for m in args.match.split(",") if m]
    print(f"{total} busy samples")
    print(f"{'incl %':>7}{'self %':>7}  function")
    for f, n in inclusive.most_common():
        if wanted and not any(w in f for w in wanted):
            continue
        print(f"{100 * n / total:>7.1f}{100 * own[f] / total:>7.1f}  {f}")
        args.top -= 1
        if args.top <= 0:
            break


if __name__ == "__main__":
    main()
