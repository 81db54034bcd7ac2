"""Bench only: the cyclic garbage collector's pauses in a server process, for bench/fanout.py
(`--gc-log`). Not app code: bench/fanout.py puts this folder first on the server's PYTHONPATH, so
Python imports it at startup, whichever source tree the server runs (this one or `--tree`).

BENCH_GC_LOG=<file>: one line per collection, `gc <wall clock start> <generation> <ms> <collected>`;
on SIGUSR2 a census of what the collector tracks (`census ...` lines: objects per generation, frozen,
and the commonest types of the oldest generation; with BENCH_GC_CENSUS_COLLECT=1 also what a full
collection then finds unreachable)."""

import gc
import os
import signal
import sys
import time

_path = os.environ.get("BENCH_GC_LOG")

if _path:
    _out = open(_path, "a", buffering=1)  # noqa: SIM115 - for the life of the process
    _started = [0.0, 0.0]

    def _timed(phase: str, info: dict) -> None:
        if phase == "start":
            _started[0], _started[1] = time.time(), time.perf_counter()
        else:
            ms = (time.perf_counter() - _started[1]) * 1000
            _out.write(f"gc {_started[0]:.4f} {info['generation']} {ms:.2f} {info['collected']}\n")

    gc.callbacks.append(_timed)

    def _census(signum: int, frame: object) -> None:
        from collections import Counter

        gens = [len(gc.get_objects(g)) for g in range(3)]
        types = Counter(type(o).__qualname__ for o in gc.get_objects(2))
        mods = Counter(getattr(type(o), "__module__", "?") for o in gc.get_objects(2))
        _out.write(
            f"census {time.time():.4f} gen0 {gens[0]} gen1 {gens[1]} gen2 {gens[2]} "
            f"frozen {gc.get_freeze_count()} threshold {gc.get_threshold()} count {gc.get_count()}\n"
        )
        if os.environ.get("BENCH_GC_CENSUS_COLLECT"):  # what a full collection now finds unreachable
            _out.write(f"census collected {gc.collect()} frozen after {gc.get_freeze_count()}\n")
        for name, n in types.most_common(40):
            _out.write(f"census type {n} {name}\n")
        for name, n in mods.most_common(15):
            _out.write(f"census module {n} {name}\n")
        _out.flush()

    signal.signal(signal.SIGUSR2, _census)
    sys.stderr.write(f"bench gc probe: logging collections to {_path}\n")
