"""What bench/fanout.py's servers log about themselves, read back: the web process's garbage collections
(`--gc-log`, bench/gcprobe) and the steps of a click to resume (`--probe`, bench/resumeprobe)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from benchlib import pct

GC_PROBE = Path(__file__).resolve().parent / "gcprobe"
STAGE_PROBE = Path(__file__).resolve().parent / "resumeprobe"


class GcLog:
    """The web process's collections, as bench/gcprobe/sitecustomize.py logs them (`--gc-log`)."""

    def __init__(self) -> None:
        import tempfile

        with tempfile.NamedTemporaryFile(prefix="bench-web-gc-", suffix=".log", delete=False) as f:
            self.path = f.name
        self.marks: list[str] = []

    def collections(self, since: float = 0.0, until: float = float("inf")) -> list[tuple[float, int, float]]:
        """(wall clock start, generation, ms) of the collections that ran in [since, until]."""
        found = []
        for line in Path(self.path).read_text().splitlines():
            parts = line.split()
            if parts[0] == "gc" and since <= float(parts[1]) + float(parts[3]) / 1000 and float(parts[1]) <= until:
                found.append((float(parts[1]), int(parts[2]), float(parts[3])))
        return found

    def during(self, since: float, until: float) -> str:
        """What a round's frames waited behind: the collections that started while they were on their way."""
        got = self.collections(since, until)
        full = [ms for _t, gen, ms in got if gen == 2]
        young = [ms for _t, gen, ms in got if gen < 2]
        return (
            f"gen2 {len(full)}"
            + (f" ({', '.join(f'{ms:.0f}' for ms in full)} ms)" if full else "")
            + f", gen0/1 {len(young)} ({sum(young):.1f} ms)"
        )

    def report(self, sent_wall: float, ms: list[float]) -> None:
        """The round's line: its collections from the send to its last frame."""
        until = sent_wall + max(ms, default=0) / 1000
        print(f"    web GC while its frames were on their way: {self.during(sent_wall, until)}")

    def census(self, pid: int, label: str, types: bool = False) -> str:
        """Objects the web process's collector tracks (SIGUSR2 to the probe), as one line."""
        import signal

        before = Path(self.path).read_text().count("\ncensus ")
        os.kill(pid, signal.SIGUSR2)
        deadline = time.monotonic() + 30
        while Path(self.path).read_text().count("\ncensus ") == before and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.3)
        lines = [ln for ln in Path(self.path).read_text().splitlines() if ln.startswith("census ")]
        last = max(i for i, ln in enumerate(lines) if ln.split()[1] not in ("type", "module", "collected"))
        head = lines[last].split(" ", 2)[2]
        head += "".join(", " + ln.split(" ", 1)[1] for ln in lines[last + 1 :] if ln.startswith("census collected"))
        if types:
            print(f"  (census {label}: {head})")
            for ln in lines[last + 1 :]:
                if not ln.startswith("census collected"):
                    print("     " + ln.split(" ", 1)[1])
        return f"{label}: {head}"

    def summary(self) -> str:
        got = self.collections()
        lines = []
        for gen in (2, 1, 0):
            ms = [m for _t, g, m in got if g == gen]
            if ms:
                lines.append(
                    f"gen{gen} {len(ms)} collections, p50 {pct(ms, 0.5):.1f} ms, p95 {pct(ms, 0.95):.1f}, "
                    f"max {max(ms):.1f}, total {sum(ms):.0f}"
                )
        return "; ".join(lines) or "none"


class StepLog:
    """The servers' step lines (bench/resumeprobe/sitecustomize.py: `tag wall-time pid thread`), read
    back window by window: each sample is when each tag was first written, in ms after `sent`, named by
    process (p0, p1, ... in the order they first wrote)."""

    def __init__(self, prefix: str) -> None:
        import tempfile

        self.path = tempfile.mktemp(prefix=prefix, suffix=".log")
        self.offset = 0
        self.pids: dict[str, str] = {}

    def window(self, sent: float, until: float) -> dict[str, float]:
        """The first time each tag was written in [sent, until], read from where the last call stopped."""
        with open(self.path) as f:
            f.seek(self.offset)
            lines = f.readlines()
            self.offset = f.tell()
        first: dict[str, float] = {}
        for line in lines:
            tag, at, pid, _thread = line.split()
            t = float(at)
            if sent <= t <= until:
                name = f"{self.pids.setdefault(pid, 'p' + str(len(self.pids)))} {tag}"
                first.setdefault(name, (t - sent) * 1000)
        return first

    @staticmethod
    def print_steps(samples: list[dict[str, float]], width: int) -> None:
        """Each step's n, p50 and p95 (ms after the start), in order of p50, with the p50 of each
        sample's time since the step above."""
        rows = []
        for name in {n for s in samples for n in s}:
            values = [s[name] for s in samples if name in s]
            rows.append((pct(values, 0.5), name, len(values), pct(values, 0.95)))
        print(f"  {'step':<{width}}{'n':>4}{'p50':>8}{'p95':>8}   p50 of each sample's time since the step above")
        before = ""
        for p50, name, n, p95 in sorted(rows):
            gaps = [s[name] - s[before] for s in samples if name in s and before in s]
            gap = f"{pct(gaps, 0.5):>10.2f}" if gaps else ""
            print(f"  {name:<{width}}{n:>4}{p50:>8.2f}{p95:>8.2f}{gap}")
            before = name


class StageProbe(StepLog):
    """`--probe`: the servers' step lines of each resume sample."""

    def __init__(self) -> None:
        super().__init__("adkweb-resume-probe-")
        self.samples: list[dict[str, float]] = []
        self.labelled: dict[str, list[dict[str, float]]] = {}  # the samples by tree (fanout.py --base)

    def sample(self, sent: float, got: float, label: str = "") -> None:
        """The first time each tag was written in [sent, got + 20 ms], in ms after `sent`."""
        first = self.window(sent, got + 0.02)
        first["= frame received"] = (got - sent) * 1000
        self.samples.append(first)
        self.labelled.setdefault(label, []).append(first)

    SPANS = (  # (from, to): p50 of each sample's time between the two
        ("POST sent", "web acted_on<"),
        ("web acted_on<", "web approve<"),
        ("web approve<", "web wake<"),
        ("web wake<", "web commit>"),
        ("web commit>", "worker claim>"),
        ("worker claim>", "worker turn_run<"),
        ("worker turn_run<", "worker append<"),
        ("worker append<", "worker store>"),
        ("worker store>", "worker append>"),
        ("worker append>", "web handout:live.event<"),
        ("web handout:live.event<", "= frame received"),
    )

    def report(self) -> None:
        print("\nspans (p50 of each sample's ms between two steps)")
        for a, b in self.SPANS:
            gaps = [s[b] - s.get(a, 0.0) for s in self.samples if b in s and (a in s or a == "POST sent")]
            print(f"  {a:<28} -> {b:<28}{pct(gaps, 0.5):>8.2f}{pct(gaps, 0.95):>8.2f}")
        print(f"\nsteps (first time each was written, ms after the POST was sent; {len(self.samples)} samples)")
        self.print_steps(self.samples, 44)
        if len(self.labelled) > 1:
            for label, samples in self.labelled.items():
                print(f"\nsteps of {label} ({len(samples)} samples)")
                self.print_steps(samples, 44)
