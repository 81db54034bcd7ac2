"""Probe: the wall time of the drain's claim (agents_app.turn_sql.start) and of a turn's end statement
(turn_sql.done_next): with the end's commit asynchronous, as this tree sends it, and synchronous (the
same SQL without its SET LOCAL), both sent as plain SQL, and as this tree sends them (prepared
statements, when the tree has them), interleaved statement by statement in one process on a throwaway
PostgreSQL database (turn_path.py's). Not a test.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/adkweb_bench_<you> REDIS_URL=redis://127.0.0.1:6379/<n> \\
        .venv/bin/python bench/turn_end_probe.py [--turns 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=100, help="statements of each kind (default 100)")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent))
    sys.path.insert(1, str(HERE))
    os.chdir(HERE.parent)
    from turn_path import django_setup

    teardown = django_setup(Path(tempfile.gettempdir()))
    try:
        probe(args.turns)
    finally:
        teardown()


def probe(n: int) -> None:
    from django.utils import timezone

    from agents_app import services, turn_sql
    from agents_app.demo.setup import demo_setup

    demo_setup()
    from benchlib import enqueue_module

    enqueue_module().session_enqueue = lambda **kw: True  # no worker: the probe claims
    prepared = not getattr(turn_sql, "_plain", True)  # a tree without prepared statements: plain only
    variants = {  # name: (done_next's SQL, plain statements instead of prepared ones)
        "synchronous commit, plain": (turn_sql._DONE_NEXT.replace(turn_sql._ASYNC, ""), True),
        "asynchronous commit, plain": (turn_sql._DONE_NEXT, True),
    }
    if prepared:
        variants["asynchronous commit, prepared"] = (turn_sql._DONE_NEXT, False)
    sent = turn_sql._DONE_NEXT
    res: dict[str, list[float]] = {f"{w} {k}": [] for k in variants for w in ("start,", "done_next,")}
    try:
        for i in range(n + 3):  # 3 warm-up rounds
            for name, (sql, plain) in variants.items():
                session = services.session_create(app_name="stock_agent", user_id="requester")
                services.message_send(session=session, text="hi", streaming=False)
                now = timezone.now()
                until = now + timedelta(seconds=30)
                if prepared:
                    turn_sql._plain = plain
                t0 = time.perf_counter()
                started = turn_sql.start(session_pk=session.pk, owner="probe", until=until, now=now)
                t1 = time.perf_counter()
                assert started.turn is not None
                turn_sql._DONE_NEXT = sql
                t2 = time.perf_counter()
                done = turn_sql.done_next(
                    turn_id=started.turn.pk, session_pk=session.pk, owner="probe", until=until, now=now
                )
                t3 = time.perf_counter()
                assert done.finished and done.released
                if i >= 3:
                    res[f"start, {name}"].append((t1 - t0) * 1000)
                    res[f"done_next, {name}"].append((t3 - t2) * 1000)
    finally:
        turn_sql._DONE_NEXT = sent
        if prepared:
            turn_sql._plain = False
    print(f"load average {os.getloadavg()[0]:.1f}; {n} statements of each kind, interleaved; ms")
    for name, values in res.items():
        values.sort()
        print(f"  {name:42s} p50 {statistics.median(values):6.2f}   p90 {values[int(len(values) * 0.9)]:6.2f}")


if __name__ == "__main__":
    main()
