"""Probe: the wall time of a turn's end statement (agents_app.turn_sql.done_next) with its commit
asynchronous, as this tree sends it, and synchronous (the same SQL without its SET LOCAL), interleaved
statement by statement in one process on a throwaway PostgreSQL database (turn_path.py's). Not a test.

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
    services.session_enqueue = lambda **kw: True  # type: ignore[assignment]  # no worker: the probe claims
    variants = {
        "done_next, synchronous commit": turn_sql._DONE_NEXT.replace(turn_sql._ASYNC, ""),
        "done_next, asynchronous commit": turn_sql._DONE_NEXT,
    }
    sent = turn_sql._DONE_NEXT
    res: dict[str, list[float]] = {k: [] for k in variants}
    try:
        for i in range(n + 3):  # 3 warm-up rounds
            for name, sql in variants.items():
                session = services.session_create(app_name="stock_agent", user_id="requester")
                services.message_send(session=session, text="hi", streaming=False)
                now = timezone.now()
                until = now + timedelta(seconds=30)
                started = turn_sql.start(session_pk=session.pk, owner="probe", until=until, now=now)
                assert started.turn is not None
                turn_sql._DONE_NEXT = sql
                t0 = time.perf_counter()
                done = turn_sql.done_next(
                    turn_id=started.turn.pk, session_pk=session.pk, owner="probe", until=until, now=now
                )
                elapsed = (time.perf_counter() - t0) * 1000
                assert done.finished and done.released
                if i >= 3:
                    res[name].append(elapsed)
    finally:
        turn_sql._DONE_NEXT = sent
    print(f"load average {os.getloadavg()[0]:.1f}; {n} statements of each kind, interleaved; ms")
    for name, values in res.items():
        values.sort()
        print(f"  {name:32s} p50 {statistics.median(values):6.2f}   p90 {values[int(len(values) * 0.9)]:6.2f}")


if __name__ == "__main__":
    main()
