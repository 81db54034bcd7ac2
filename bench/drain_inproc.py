"""Benchmark: a worker's drain of one turn against ADK's Runner called directly, in one process, on
the same worker loop, interleaved turn by turn. Not a test: it prints figures.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/adkweb_bench_<you> REDIS_URL=redis://127.0.0.1:6379/<n> \\
        .venv/bin/python bench/drain_inproc.py [--turns 40] [--tree /path/to/another/worktree]

Without a broker or a second process: what bench/turn_path.py's *run* stage measures (claim, run,
finish, publishes) with the queue and the process boundary taken out, and both sides on one event
loop (agents_app.worker_loop) and one channel layer. Each round sends one message and drains it
(`session_turns_run`), then runs one turn of ADK's `Runner` on `DjangoSessionService` with the App
the worker runs (turn_path.py's path 3r); a new session every 10 turns on both sides. Prints the
median wall and CPU time (this process, every thread: the drain's database thread too) of each, and
the ratios (issue 12 target 3: run <= 1.1x direct); and the turns' thread's CPU, its kernel share and
its context switches (getrusage: how often it waited, how often another process took its core), and
how long it was runnable but queued for a core and how long asleep (/proc/thread-self/schedstat).
`--tree` runs another worktree's code (a before/after comparison: run both, alternating). The
database is created and dropped (test_<name>_drain_<pid>).

`--block N` prints the ratio of each block of N rounds (its spread: min, median, max), and with
`--alternate` the rounds where the drain went first apart from those where it went second.

`--callgrind` (bench/drain_callgrind.py) runs the same under valgrind's callgrind and counts the
instructions of each measured turn (every thread of the process, the collection switched on around each one with
callgrind_control): counts that do not move with the machine's load, so two trees' drain ÷ direct can
be compared to a fraction of a percent where their wall and CPU times move by ±0.08× run to run.
About 50× slower: use --turns 10-20. Needs valgrind (apt-get install valgrind).
"""

from __future__ import annotations

import argparse
import os
import queue
import resource
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import drain_callgrind

CALLGRIND = drain_callgrind.CALLGRIND

_THREAD = ("ru_utime", "ru_stime", "ru_nvcsw", "ru_nivcsw")  # a turn's thread's getrusage fields kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40, help="turns of each kind (default 40)")
    parser.add_argument("--tree", default=str(Path(__file__).resolve().parents[1]), help="the worktree to run")
    parser.add_argument(
        "--only", choices=["drain", "direct"], help="run one kind only (to profile it: py-spy record -- ...)"
    )
    parser.add_argument("--callgrind", action="store_true", help="count each turn's instructions (valgrind)")
    parser.add_argument("--alternate", action="store_true", help="the direct Runner first every other turn")
    parser.add_argument("--block", type=int, default=10, help="rounds per block for the ratio's spread (default 10)")
    parser.add_argument(
        "--worker-gc",
        action="store_true",
        help="the Celery worker's garbage-collector policy (its ready signal's: adkweb.gcpolicy.freeze_worker, or "
        "freeze_startup in older trees) before the first turn; prints the full collections' pauses",
    )
    args = parser.parse_args()
    if args.callgrind and not os.environ.get(CALLGRIND):
        drain_callgrind.run(args, os.path.abspath(sys.argv[0]))
        return
    root = Path(args.tree).resolve()
    sys.path.insert(0, str(root))
    os.chdir(root)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "adkweb.settings")
    os.environ["ADKWEB_EMBEDDED_WORKER"] = "0"
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-secret-key-not-for-any-deployment-0123456789")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    if not os.environ.get("DATABASE_URL", "").startswith("postgres") or not os.environ.get("REDIS_URL"):
        raise SystemExit("set DATABASE_URL (PostgreSQL) and REDIS_URL")
    import django

    django.setup()
    import logging

    logging.getLogger("google_adk.google.adk.telemetry._metrics").addFilter(
        lambda record: "token usage" not in record.getMessage()
    )
    from django.db import connection

    old_name = connection.settings_dict["NAME"]
    name = f"test_{old_name}_drain_{os.getpid()}"
    connection.settings_dict.setdefault("TEST", {})["NAME"] = name
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        print(f"{root} (load average {os.getloadavg()[0]:.1f})")
        measure(args.turns, args.only, args.alternate, args.worker_gc, args.block)
    finally:
        from django.db import connections

        connections.close_all()
        with connection._nodb_cursor() as cursor:
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [name],
            )
        connection.creation.destroy_test_db(old_name, verbosity=0)


def measure(
    turns: int, only: str | None = None, alternate: bool = False, worker_gc: bool = False, block: int = 10
) -> None:
    from asgiref.sync import ThreadSensitiveContext
    from google.adk.runners import Runner
    from google.genai import types

    from agents_app import services, worker_loop
    from agents_app.demo.setup import demo_setup
    from agents_app.run_cache import app_for_run
    from agents_app.runner import session_turns_run
    from agents_app.session_service import DjangoSessionService

    demo_setup()
    pauses = _full_collections(worker_gc)
    from benchlib import enqueue_module

    enqueue_module().session_enqueue = lambda **kwargs: True  # no broker: drained here
    store = DjangoSessionService()
    runner = Runner(app=app_for_run("stock_agent"), session_service=store)
    text = "What is the price of GOOG?"

    async def direct(session_id: str) -> None:
        async with ThreadSensitiveContext(executor=worker_loop.db_executor()):
            message = types.Content(role="user", parts=[types.Part(text=text)])
            async for _ in runner.run_async(user_id="requester", session_id=session_id, new_message=message):
                pass

    jobs: queue.Queue[tuple[str, Any, bool, int] | None] = queue.Queue()
    done: queue.Queue[tuple[float, ...]] = queue.Queue()

    counting = bool(os.environ.get(CALLGRIND))
    if counting:
        from agents_app import publish_order

        publish_order.LEAD_WAIT = 600.0  # see drain_callgrind.run()
        from adkweb import live

        hints = getattr(live, "EMPTY_LATELY", None) is not None and live  # before the split (a --base tree)
        if not hints:
            from adkweb import watch_hints as hints  # type: ignore[no-redef]
        hints.EMPTY_LATELY = 600.0  # a turn's end counted "nobody watches" a moment ago, as without valgrind

    def work() -> None:  # one thread, one worker loop, as a worker thread runs its turns
        while (job := jobs.get()) is not None:
            kind, arg, measured, index = job
            if counting and measured:
                drain_callgrind.control("-i", "on")
            before, sched = resource.getrusage(resource.RUSAGE_THREAD), _schedstat()
            wall, cpu = time.perf_counter(), time.process_time()
            if kind == "drain":
                session_turns_run(arg)
            else:
                worker_loop.run(direct(arg))
            cpu_ms, wall_ms = (time.process_time() - cpu) * 1000, (time.perf_counter() - wall) * 1000
            after, (ran, queued) = resource.getrusage(resource.RUSAGE_THREAD), _schedstat()
            queued_ms, ran_ms = (queued - sched[1]) / 1e6, (ran - sched[0]) / 1e6  # the scheduler's clock
            sample = (wall_ms, cpu_ms, *(getattr(after, f) - getattr(before, f) for f in _THREAD))
            sample += (queued_ms, wall_ms - ran_ms - queued_ms)  # runnable but not running; asleep (waiting)
            if counting and measured:
                drain_callgrind.control("-i", "off")
                drain_callgrind.control(f"--dump={kind}{index}")  # before the caller goes on (the last turn's too)
            done.put(sample)

    threading.Thread(target=work, name="bench-worker", daemon=True).start()
    results: dict[str, list[tuple[float, ...]]] = {"drain": [], "direct": []}
    drain_first: list[bool] = []  # per measured round: did the drain go first (right after its message's commit)?
    warm = 3
    session: Any = None
    direct_id = ""
    for i in range(turns + warm):
        if i == warm:
            pauses.clear()  # the measured turns' only
        if i % 10 == 0:
            session = services.session_create(app_name="stock_agent", user_id="requester")
            direct_id = store.create_session_sync(app_name="stock_agent", user_id="requester").id
        if only != "direct":
            services.message_send(session=session, text=text, streaming=False)
        pair = [("drain", session.pk), ("direct", direct_id)]
        if i >= warm:
            drain_first.append(not (alternate and i % 2))
        for kind, arg in pair[::-1] if alternate and i % 2 else pair:
            if only and kind != only:
                continue
            jobs.put((kind, arg, i >= warm, i))
            sample = done.get()
            if i >= warm:
                results[kind].append(sample)
    jobs.put(None)
    if counting:
        return  # the parent reads the dumps
    stages = _row_stages(warm) if only != "direct" else []
    medians = {
        k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v)) for k, v in results.items() if v
    }
    for kind, (wall, cpu) in medians.items():
        # The turns' thread: its CPU (median), the kernel's share of it (sampled at the kernel's ticks: a mean),
        # how often it gave up its core (waiting) or had it taken (another process woke on it)
        thread = statistics.median(r[2] + r[3] for r in results[kind]) * 1000
        system, waits, taken, queued, asleep = (statistics.mean(r[i] for r in results[kind]) for i in range(3, 8))
        print(
            f"  {kind:<7} median wall {wall:7.1f} ms   CPU {cpu:6.1f} ms   ({len(results[kind])} turns; the turns' "
            f"thread {thread:5.2f} ms, system {system * 1000:4.2f} ms, {waits:4.1f} waits, {taken:4.1f} preempted; "
            f"means: queued for a core {queued:4.2f} ms, asleep {asleep:4.2f} ms)"
        )
        walls = sorted(r[0] for r in results[kind])
        if worker_gc and len(walls) > 1:
            q = statistics.quantiles(walls, n=100)
            print(f"          wall p95 {q[94]:.1f}, p99 {q[98]:.1f}, max {walls[-1]:.1f} ms")
    if worker_gc:
        print(f"  full collections in the measured turns (ms): {[round(p, 1) for p in pauses]}")
    if only:
        return
    print(
        f"  drain / direct: wall {medians['drain'][0] / medians['direct'][0]:.2f}x, "
        f"CPU {medians['drain'][1] / medians['direct'][1]:.2f}x   (target 3: run <= 1.1x direct)"
    )
    if stages:
        run = statistics.median(stages)
        print(
            f"  the run stage by the Turn row (claimed -> finished: bench/turn_path.py's, the issue's stage): median "
            f"{run:.1f} ms, / direct wall {run / medians['direct'][0]:.2f}x   (the drain's whole wall above also has "
            "the claim's way there and back, the DONE's reply and the publishes after it)"
        )
    drained, directs = results["drain"], results["direct"]
    extra = [statistics.mean(r[i] for r in drained) - statistics.mean(r[i] for r in directs) for i in (3, 4, 5, 6, 7)]
    print(
        f"  drain - direct, the turns' thread (means): system {extra[0] * 1000:+.2f} ms, waits {extra[1]:+.1f}, "
        f"preempted {extra[2]:+.1f}; queued for a core {extra[3]:+.2f} ms, asleep {extra[4]:+.2f} ms"
    )
    _spread(drained, directs, drain_first, block)


def _row_stages(warm: int) -> list[float]:
    """Each measured drained turn's run stage as bench/turn_path.py splits a turn by its row's timestamps:
    claimed (the claim's UPDATE, clock_timestamp()) -> finished (the DONE's), in ms; one turn a round, in
    order, the first `warm` rounds' left out."""
    from agents_app.models import Turn

    rows = Turn.objects.order_by("pk").values_list("started_at", "finished_at")
    return [(end - start).total_seconds() * 1000 for start, end in list(rows)[warm:] if start and end]


def _schedstat() -> tuple[int, int]:
    """The calling thread's time on a core and runnable on a run queue waiting for one, in ns (0, 0 where the
    kernel does not say): a turn's wall is its time on a core, waiting for one, and asleep (its replies)."""
    try:
        with open("/proc/thread-self/schedstat") as stat:
            ran, queued, _ = stat.read().split()
    except (OSError, ValueError):
        return 0, 0
    return int(ran), int(queued)


def _spread(drained: list[tuple[float, ...]], directs: list[tuple[float, ...]], first: list[bool], block: int) -> None:
    """The ratio's spread: drain / direct of the medians of each block of `block` rounds (the same rounds on
    both sides), and, where the order alternated, of the rounds where the drain went first and where it
    went second (whether running right after the message's commit, the drain's lot otherwise, moves it)."""

    def ratios(rounds: list[int]) -> tuple[float, float]:
        return tuple(  # type: ignore[return-value]
            statistics.median(drained[r][i] for r in rounds) / statistics.median(directs[r][i] for r in rounds)
            for i in (0, 1)
        )

    blocks = [ratios(list(range(s, s + block))) for s in range(0, len(drained) - block + 1, block)]
    if len(blocks) > 1:
        for i, what in enumerate(("wall", "CPU")):
            each = sorted(b[i] for b in blocks)
            print(
                f"  blocks of {block} rounds, {what}: min {each[0]:.3f}x, median {statistics.median(each):.3f}x, "
                f"max {each[-1]:.3f}x  ({' '.join(f'{b[i]:.2f}' for b in blocks)})"
            )
    if any(first) and not all(first):
        for label, went in (("drain first", True), ("direct first", False)):
            wall, cpu = ratios([r for r, f in enumerate(first) if f == went])
            print(f"  {label:<12}: wall {wall:.3f}x, CPU {cpu:.3f}x")


def _full_collections(worker_gc: bool) -> list[float]:
    """With `worker_gc`, the worker's policy applied now (as its ready signal does); the list the pauses
    of the full collections on the turns' thread are appended to from then on."""
    import gc

    pauses: list[float] = []
    if not worker_gc:
        return pauses
    from adkweb import gcpolicy

    getattr(gcpolicy, "freeze_worker", gcpolicy.freeze_startup)()
    started: list[float] = []

    def timed(phase: str, info: dict[str, int]) -> None:
        if info["generation"] == 2 and phase == "start":
            started[:] = [time.perf_counter()]
        elif info["generation"] == 2 and started and threading.current_thread().name == "bench-worker":
            pauses.append((time.perf_counter() - started[0]) * 1000)

    gc.callbacks.append(timed)
    return pauses


if __name__ == "__main__":
    main()
