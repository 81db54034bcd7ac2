"""Benchmark: adkweb's pages at scale (100,000 tickets, 10% open; 1,000,000 events) on PostgreSQL, as a
logged-in approver. Not a test: it prints figures.

    .venv/bin/python bench/pages.py [--requests 30] [--reseed] [--explain 2]
    .venv/bin/python bench/pages.py --tickets 10000 --events 100000 --db adkweb_bench_pages_small  # quick

The data set is seeded once into a PostgreSQL database of its own (default `<BENCH_DB_PREFIX>_pages`,
adkweb_bench_pages, on BENCH_PG, default postgres://postgres@127.0.0.1:5432) by bench/pages_seed.py, the
way the app writes it (bulk COPY, then VACUUM ANALYZE): about 3 minutes. Later runs find it seeded and
skip that; --reseed drops and seeds it again, --drop just drops it. Pages are requested through Django's
test client (the whole middleware, view and template stack; the connection is closed after every request,
as with CONN_MAX_AGE=0 in production), logged in as the demo approver. Each page: p50 and p95 over
--requests requests (after 2 untimed), the number of SQL queries and the time spent in them, then EXPLAIN
ANALYZE of its slowest queries. See bench/README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import DB_PREFIX, ROOT, pct, pg_create, pg_drop, pg_exists, pg_url  # noqa: E402

DB = f"{DB_PREFIX}_pages"


def deep_page_url(page: int, query: str = "status=all", path: str = "/", size: int = 0, **filters: object) -> str:
    """The URL of the inbox's "Next" link on page `page` - 1 (as the approver; by default all statuses,
    newest first; `query` and `filters`: another inbox's, the same twice): it carries the keyset cursor
    of that page's last row (adkweb.paging). `path`, `size`: the approvals API's list and its page size."""
    from django.contrib.auth.models import User

    from adkweb.paging import cursor_of
    from approvals.selectors import INBOX_PAGE_SIZE, InboxFilters, ticket_queryset

    approver = User.objects.get(username="approver")
    qs = ticket_queryset(filters=InboxFilters(**{"status": "all", **filters}), user=approver)  # type: ignore[arg-type]
    size = size or INBOX_PAGE_SIZE
    page = min(page, max(2, qs.count() // size))  # smaller sizes (make bench): the last full page
    last = qs[(page - 1) * size - 1]
    return f"{path}?{query}&page={page}&after={cursor_of(last, 'created_at')}"


def pages(info) -> list[tuple[str, str]]:  # noqa: ANN001 - pages_seed.SeedInfo
    return [
        ("inbox (default: open, newest)", "/"),
        ("inbox filtered (closed, ticket_agent)", "/?status=closed&agent=ticket_agent"),
        ("inbox searched (q=hotel, all)", "/?q=hotel&status=all"),
        ("inbox mine (all statuses)", "/?mine=1&status=all"),
        ("inbox mine (open: the default status)", "/?mine=1"),
        ("inbox mine, page 1000 by its Next link", deep_page_url(1000, "mine=1&status=all", mine=True)),
        ("inbox mine and an agent (ticket_agent, all)", "/?mine=1&status=all&agent=ticket_agent"),
        ("inbox deep page (all, page 2000, its Next link)", deep_page_url(2000)),
        ("inbox deep page by number (?page=2000: offset)", "/?status=all&page=2000"),
        ("inbox htmx fragment (default)", "/#htmx"),
        ("ticket page (small conversation)", f"/tickets/{info.open_ticket_pk}/"),
        ("ticket page (2,000-event conversation)", f"/tickets/{info.big_ticket_pk}/"),
        ("conversations list", "/sessions/"),
        ("conversations list, waiting", "/sessions/?status=waiting"),
        ("conversation, 2,000 events", f"/sessions/{info.big_session_pk}/"),
        ("API ticket list (default: open, 50)", "/api/pending-calls"),
        ("API ticket list, mine (all statuses)", "/api/pending-calls?mine=true&status=all"),
        ("API ticket list, page 1000 by its next link", deep_page_url(1000, API_DEEP, "/api/pending-calls", 50)),
    ]


API_DEEP = "status=all&page_size=50"


def setup(db: str, reseed: bool, n_tickets: int, n_events: int, tree: Path = ROOT):  # noqa: ANN201 - SeedInfo
    os.environ.update(
        DATABASE_URL=pg_url(db),
        DJANGO_SETTINGS_MODULE="adkweb.settings",
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY="bench-only-secret-key-not-for-any-deployment-0123456789",
        DJANGO_ALLOWED_HOSTS="testserver,127.0.0.1",
        ADKWEB_EMBEDDED_WORKER="0",
        ADKWEB_STATIC_MANIFEST="false",  # static URLs from the source folders: no collectstatic needed
        LOG_LEVEL="WARNING",
    )
    os.environ.pop("REDIS_URL", None)
    if reseed or not pg_exists(db):
        pg_create(db)
    sys.path.insert(0, str(tree))  # the app measured: this tree's, or --tree's
    os.chdir(tree)  # Celery's Django fixup puts the working directory first on sys.path
    import django

    django.setup()
    import pages_seed
    from django.core.management import call_command

    info = pages_seed.seeded()
    if info is None or info.tickets != n_tickets or info.events != n_events:
        if info is not None:  # another size: start over
            from django.db import connection

            connection.close()
            pg_create(db)
            info = None
    call_command("migrate", verbosity=0, interactive=False)  # also brings a reused database up to date
    from agents_app.demo.setup import demo_setup

    demo_setup()  # idempotent: roles and demo users as the current code defines them
    if info is None:
        print(f"seeding {db}: {n_tickets} tickets, {n_events} events (once; later runs reuse it) ...", flush=True)
        info = pages_seed.seed(n_tickets, n_events)
    return info


def time_page(client, url: str, n: int) -> tuple[list[float], list[dict], int, list[float]]:  # noqa: ANN001
    """ms per request, the last request's queries, its response size, and CPU ms per request (this
    process's CPU time: what other work on the machine does not inflate, unlike the wall clock)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    htmx = url.endswith("#htmx")
    url = url.removesuffix("#htmx")
    headers = {"HX-Request": "true", "HX-Target": "inbox-results"} if htmx else {}
    ms, queries, size, cpu = [], [], 0, []
    for i in range(n + 2):
        with CaptureQueriesContext(connection) as ctx:
            started, cpu_started = time.perf_counter(), time.process_time()
            response = client.get(url, headers=headers)
            elapsed = (time.perf_counter() - started) * 1000
            cpu_ms = (time.process_time() - cpu_started) * 1000
        if response.status_code != 200:
            raise RuntimeError(f"{url}: HTTP {response.status_code}")
        if i >= 2:
            ms.append(elapsed)
            cpu.append(cpu_ms)
        queries, size = list(ctx.captured_queries), len(response.content)
    return ms, queries, size, cpu


def explain(sql: str) -> str:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql)
        return "\n".join(row[0] for row in cur.fetchall())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=30, help="timed requests per page (default 30)")
    parser.add_argument("--tickets", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--db", default=DB, help=f"bench database name (default {DB}; must start adkweb_bench_)")
    parser.add_argument("--reseed", action="store_true", help="drop the database and seed it again")
    parser.add_argument("--drop", action="store_true", help="drop the bench database and exit")
    parser.add_argument("--explain", type=int, default=2, help="EXPLAIN ANALYZE this many slowest queries per page")
    parser.add_argument("--only", default="", help="only pages whose label contains this text")
    parser.add_argument(
        "--tree", type=Path, default=ROOT, help="measure the app of this worktree (e.g. the base), with this bench"
    )
    args = parser.parse_args()
    if args.drop:
        pg_drop(args.db)
        return
    info = setup(args.db, args.reseed, args.tickets, args.events, args.tree.resolve())
    from django.contrib.auth.models import User
    from django.test import Client

    client = Client()
    client.force_login(User.objects.get(username="approver"))
    results = []
    for label, url in pages(info):
        if args.only and args.only not in label:
            continue
        ms, queries, size, cpu = time_page(client, url, args.requests)
        results.append((label, url, ms, queries, size, cpu))
    print(
        f"\npages at scale: {info.tickets} tickets, {info.events} events, PostgreSQL ({args.db}); "
        f"logged in as approver; {args.requests} requests each; app of {args.tree.resolve()}"
    )
    width = max(len(r[0]) for r in results) + 2
    head = f"{'page':<{width}}{'p50 ms':>8}{'p95 ms':>8}{'queries':>9}{'SQL ms':>8}"
    head += f"{'CPU ms':>8}{'CPU min':>8}{'KiB':>7}"
    print(head + "   target p95 <= 50 ms")
    for label, _url, ms, queries, size, cpu in results:
        sql_ms = sum(float(q["time"]) for q in queries) * 1000
        cells = f"{pct(ms, 0.5):>8.1f}{pct(ms, 0.95):>8.1f}{len(queries):>9}{sql_ms:>8.1f}{pct(cpu, 0.5):>8.1f}"
        cells += f"{min(cpu):>8.1f}{size / 1024:>7.0f}"
        print(f"{label:<{width}}{cells}")
    print("(SQL ms: time in SQL queries of the last request, as Django measured it; the rest is Python;")
    print(" CPU ms: p50 of this process's CPU time per request, which the machine's other load inflates less than the")
    print(" wall clock (on shared cores it still does: compare runs interleaved); CPU min: the least of them)")
    if args.explain:
        for label, url, _ms, queries, _size, _cpu in results:
            print(f"\n=== {label}: {url.removesuffix('#htmx')} — {len(queries)} queries, slowest:")
            seen = set()
            for q in sorted(queries, key=lambda q: -float(q["time"])):
                if q["sql"] in seen or not q["sql"].lstrip().upper().startswith("SELECT"):
                    continue
                seen.add(q["sql"])
                print(f"\n-- {float(q['time']) * 1000:.1f} ms: {q['sql'][:600]}")
                print(explain(q["sql"]))
                if len(seen) >= args.explain:
                    break


if __name__ == "__main__":
    main()
