"""Benchmark: what the approve POST costs in the web process (services settings: PostgreSQL + Redis
broker), in-process through Django's test client. Not a test: it prints figures.

    .venv/bin/python bench/approve_path.py [--tickets 40] [--profile out.html]

Creates `<BENCH_DB_PREFIX>_approve` (dropped afterwards), flushes BENCH_REDIS_URL (no worker runs:
the drain messages stay queued), makes N conversations each waiting on a reimbursement ticket
(rows, no agent run) and approves each through the ticket page (`POST /tickets/<id>/approve/`, htmx,
CSRF checked), as the approver. Per POST: wall time to the answer, time to the enqueue (the
`session_drain` message published after commit), SQL queries and transactions, the publish's own
time. `--profile FILE` writes a pyinstrument profile of the timed POSTs (html, or text for .txt).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (  # noqa: E402
    DB_PREFIX,
    REDIS_URL,
    ROOT,
    adkweb_env,
    enqueue_module,
    pct,
    pg_create,
    pg_drop,
    redis_flush,
)

DB = f"{DB_PREFIX}_approve"


def setup() -> None:
    os.environ.update(
        adkweb_env(pg_create(DB), REDIS_URL, ADKWEB_EMBEDDED_WORKER="false", DJANGO_ALLOWED_HOSTS="testserver")
    )
    sys.path.insert(0, str(ROOT))
    sys.path.append(str(ROOT / "tests"))
    import django

    django.setup()
    from django.core.management import call_command

    from agents_app.demo.setup import demo_setup

    call_command("migrate", verbosity=0, interactive=False)
    demo_setup()


def main() -> None:  # noqa: PLR0915
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickets", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--profile", default="")
    parser.add_argument("--sql", action="store_true", help="print the SQL of the last POST")
    args = parser.parse_args()
    redis_flush(REDIS_URL)
    setup()
    try:
        run(args)
    finally:
        from django.db import connections

        connections.close_all()
        pg_drop(DB)
        redis_flush(REDIS_URL)


def run(args: argparse.Namespace) -> None:  # noqa: PLR0915
    import approvals_factories as factories
    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    approver = User.objects.get(username="approver")
    client = Client(enforce_csrf_checks=True)
    client.force_login(approver)
    tickets = [factories.ticket() for _ in range(args.warmup + args.tickets)]
    # the CSRF cookie and token, as the ticket page gives them
    page = client.get(f"/tickets/{tickets[0].pk}/")
    assert page.status_code == 200, page.status_code
    token = client.cookies["csrftoken"].value

    published: list[float] = []
    publish_cost: list[float] = []
    # the enqueue the tree uses: the wake-up (agents_app.wake, ADKWEB_WAKE_LIST) or Celery's task
    queueing = enqueue_module()
    waking = getattr(queueing, "wake", None) is not None and queueing.wake.enabled()
    sender = "_send_wake" if waking else "_send_drain"
    send = getattr(queueing, sender)

    def timed_send(session_pk: int) -> None:
        t = time.perf_counter()
        send(session_pk)
        now = time.perf_counter()
        published.append(now)
        publish_cost.append((now - t) * 1000)

    setattr(queueing, sender, timed_send)
    from django.db.backends.base.base import BaseDatabaseWrapper

    committed: list[float] = []  # when each COMMIT returned (the worker's claim waits for it)
    real_commit = BaseDatabaseWrapper.commit

    def timed_commit(self: BaseDatabaseWrapper) -> None:
        real_commit(self)
        committed.append(time.perf_counter())

    BaseDatabaseWrapper.commit = timed_commit  # type: ignore[method-assign]
    profiler = None
    rows: list[tuple[float, float, int, int, float, float]] = []
    for i, ticket in enumerate(tickets):
        timed = i >= args.warmup
        if timed and args.profile and profiler is None:
            from pyinstrument import Profiler

            if args.profile.endswith(".prof"):
                import cProfile

                # FILE.cpu.prof: CPU time (process_time), not wall time, per function
                profiler = (
                    cProfile.Profile(time.process_time) if args.profile.endswith(".cpu.prof") else cProfile.Profile()
                )
                profiler.enable()
            else:
                profiler = Profiler(interval=0.001)
                profiler.start()
        with CaptureQueriesContext(connection) as queries:
            start = time.perf_counter()
            cpu_start = time.process_time()
            published.clear()
            committed.clear()
            resp = client.post(
                f"/tickets/{ticket.pk}/approve/",
                {"approve-comment": "", "approve-args_hash": ticket.args_hash},
                HTTP_HX_REQUEST="true",
                HTTP_HX_TARGET="ticket-panel",
                HTTP_X_CSRFTOKEN=token,
                HTTP_REFERER=f"http://testserver/tickets/{ticket.pk}/",
            )
            end = time.perf_counter()
            cpu = (time.process_time() - cpu_start) * 1000
        assert resp.status_code == 200, (resp.status_code, resp.content[:500])
        if timed:
            sqls = [q["sql"] for q in queries.captured_queries]
            commits = sum(1 for s in sqls if s.upper().startswith(("COMMIT", "RELEASE SAVEPOINT")))
            enq = (published[0] - start) * 1000 if published else float("nan")
            done = (committed[0] - start) * 1000 if committed else float("nan")
            rows.append(((end - start) * 1000, enq, len(sqls), commits, cpu, done))
    if args.sql:
        for q in queries.captured_queries:
            print(f"  {q['time']:>6} {q['sql'][:220]}")
    if profiler is not None and args.profile.endswith(".prof"):
        profiler.disable()
        profiler.dump_stats(args.profile)
        print(f"profile: {args.profile}")
    elif profiler is not None:
        profiler.stop()
        out = Path(args.profile)
        out.write_text(
            profiler.output_text(unicode=True, show_all=False) if out.suffix == ".txt" else profiler.output_html()
        )
        print(f"profile: {out}")
    setattr(queueing, sender, send)
    BaseDatabaseWrapper.commit = real_commit  # type: ignore[method-assign]
    load = os.getloadavg()
    answered, enqueued, cost = [r[0] for r in rows], [r[1] for r in rows], publish_cost[-len(rows) :]
    print(f"approve POST, in-process (PostgreSQL + Redis broker), {len(rows)} tickets, load {load[0]:.1f}")
    for label, values, fmt in (
        ("POST answered", answered, ".1f"),
        ("POST -> drain enqueued", enqueued, ".1f"),
        ("POST -> decision committed", [r[5] for r in rows], ".1f"),
        (f"publish alone ({sender})", cost, ".2f"),
        ("CPU per POST (process)", [r[4] for r in rows], ".1f"),
    ):
        print(f"  {label:<34}p50 {pct(values, 0.5):7{fmt}}  p95 {pct(values, 0.95):7{fmt}} ms")
    statements, commits = sorted({r[2] for r in rows}), sorted({r[3] for r in rows})
    print(f"  SQL statements per POST {statements} (commits and savepoint releases {commits})")


if __name__ == "__main__":
    main()
