"""Benchmark: what one agent turn costs at each layer of adkweb's path, printed side by side.
Not a test: it prints figures.

    .venv/bin/python bench/turn_path.py [--sessions 4] [--turns-per-session 20] [--concurrency 2]

The turn: stock_agent (offline demo model `demo-offline`) answers "What is the price of GOOG?" with
one tool call and one reply (4 stored events). It runs on:

  1. ADK's Runner + InMemorySessionService                  (the floor)
  2. ADK's Runner + SqliteSessionService                    (ADK's own durable store)
  3. ADK's Runner + our DjangoSessionService                (our store, called directly)
  3r. the same on the App the worker runs (resumable: + an end-of-agent event; adkweb's plugins)
  4. services.message_send -> Turn row -> after-commit enqueue -> Celery worker threads on the
     memory broker (embedded mode) -> runner -> stored events, observed on the channel layer
  5. with REDIS_URL and DATABASE_URL set: the same as 4 with a `celery worker` subprocess
     (BENCH_CELERY_POOL: threads, as in production, or prefork) on Redis, observed on the Redis
     channel layer; then path 5 and path 3r paired turn by turn in one run (bench/turn_path_pairs.py):
     target 3's run ratio without the minutes between the two paths' phases

Paths 4 and 5 live in bench/turn_path_worker.py.

Django runs on a throwaway SQLite file by default; with DATABASE_URL set (PostgreSQL) it creates a
test database (test_<name>), migrates it and drops it afterwards. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from turn_path_pairs import NAME as PAIRS
from turn_path_pairs import print_pairs
from turn_path_worker import (
    APP,
    EVENTS_PER_TURN,
    ROOT,
    TEXT,
    USER,
    Row,
    embedded_path,
    pct,
    services_child,
    services_path,
)

# --- Django --------------------------------------------------------------------------------


def django_setup(tmp: Path, migrate: bool = True, root: Path = ROOT) -> Callable[[], None]:
    """Configure Django on a throwaway database; returns the teardown that removes it. `root`: the tree whose
    app is measured (queue_probe.py's --base child passes its own: this tree's would come first on sys.path)."""
    sys.path.insert(0, str(root))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "adkweb.settings")
    os.environ["ADKWEB_EMBEDDED_WORKER"] = "0"  # this script starts its own worker
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-secret-key-not-for-any-deployment-0123456789")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    if not os.environ.get("DATABASE_URL"):
        os.environ["DATABASE_URL"] = f"sqlite:///{tmp / 'django.sqlite3'}"
    import django

    django.setup()
    import logging

    # ADK warns on every model call that the offline model reports no token usage. A filter, not a
    # level: starting a Celery worker resets logger levels.
    logging.getLogger("google_adk.google.adk.telemetry._metrics").addFilter(
        lambda record: "token usage" not in record.getMessage()
    )
    from django.db import connection

    if not migrate:  # the services child: the parent made the database
        return connection.close
    if connection.vendor == "sqlite":
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
        return connection.close
    # A name of our own: test_<name> is what the integration tests use, and autoclobber would drop it.
    old_name = connection.settings_dict["NAME"]
    test_name = f"test_{old_name}_turn_path_{os.getpid()}"
    connection.settings_dict.setdefault("TEST", {})["NAME"] = test_name
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)

    def teardown() -> None:
        from django.db import connections

        connections.close_all()
        with connection._nodb_cursor() as cursor:  # worker connections that outlived their threads
            cursor.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                [test_name],
            )
        connection.creation.destroy_test_db(old_name, verbosity=0)

    return teardown


def user_message() -> Any:
    from google.genai import types

    return types.Content(role="user", parts=[types.Part(text=TEXT)])


# --- 1-3: ADK's Runner on a session service, in this process ------------------------------


async def run_direct(name: str, service: Any, agent: Any, n_sessions: int, per_session: int, app: Any = None) -> Row:
    """Turns one after another, session after session; one Runner for the whole run (on `app`, the
    ADK App as the worker runs it, if given: resumable, so one more stored event per turn)."""
    from google.adk.runners import Runner

    if app is not None:
        runner = Runner(app=app, session_service=service)
    else:
        runner = Runner(app_name=APP, agent=agent, session_service=service)
    per_turn = EVENTS_PER_TURN + (1 if app is not None else 0)  # + the end-of-agent marker

    async def turn(session_id: str) -> float:
        started = time.perf_counter()
        yielded = [e async for e in runner.run_async(user_id=USER, session_id=session_id, new_message=user_message())]
        elapsed = (time.perf_counter() - started) * 1000
        assert len(yielded) >= EVENTS_PER_TURN - 1, f"{name}: {len(yielded)} events yielded"
        return elapsed

    # Warm up outside the timings (schema creation, first connection, first-call caches).
    warm = await service.create_session(app_name=APP, user_id=USER)
    await turn(warm.id)
    ms: list[float] = []
    session_ids = []
    for _ in range(n_sessions):
        session = await service.create_session(app_name=APP, user_id=USER)
        session_ids.append(session.id)
        for _ in range(per_session):
            ms.append(await turn(session.id))
    stored = await service.get_session(app_name=APP, user_id=USER, session_id=session_ids[-1])
    assert len(stored.events) == per_turn * per_session, f"{name}: {len(stored.events)} events stored"
    return Row(name, ms, sum(ms) / 1000)


async def direct_paths(tmp: Path, n_sessions: int, per_session: int) -> list[Row]:
    from asgiref.sync import sync_to_async
    from django.db import connections
    from google.adk.sessions.in_memory_session_service import InMemorySessionService
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    from agents_app.agents import build_agent

    try:
        from agents_app.run_cache import app_for_run
    except ImportError:  # a main before the runner cache (for before/after runs)
        from agents_app.runner import app_for_run  # type: ignore[no-redef]
    from agents_app.session_service import DjangoSessionService

    agent = await sync_to_async(build_agent)(APP)  # built once here, as the worker's runner cache does
    app = await sync_to_async(app_for_run)(APP)  # the App the worker runs: resumable, adkweb's plugins
    rows = [
        await run_direct(
            "1 ADK Runner + InMemorySessionService", InMemorySessionService(), agent, n_sessions, per_session
        ),
        await run_direct(
            "2 ADK Runner + SqliteSessionService",
            SqliteSessionService(str(tmp / "adk.sqlite3")),
            agent,
            n_sessions,
            per_session,
        ),
        await run_direct("3 ADK Runner + DjangoSessionService", DjangoSessionService(), agent, n_sessions, per_session),
        await run_direct(
            "3r ADK Runner + DjangoSessionService, resumable App",
            DjangoSessionService(),
            agent,
            n_sessions,
            per_session,
            app=app,
        ),
    ]
    await sync_to_async(connections.close_all)()
    return rows


# --- Report ---------------------------------------------------------------------------------


def build_agent_ms(times: int = 20) -> float:
    """Building the agent from its config rows (what the worker paid every turn before its runner cache)."""
    from agents_app.agents import build_agent

    build_agent(APP)
    started = time.perf_counter()
    for _ in range(times):
        build_agent(APP)
    return (time.perf_counter() - started) * 1000 / times


def print_rows(rows: list[Row]) -> None:
    floor, adk_sqlite = pct(rows[0].ms, 0.5), pct(rows[1].ms, 0.5)
    width = max(len(r.path) for r in rows) + 2
    print(f"{'path':<{width}}{'turns':>6}{'median ms':>11}{'p95 ms':>9}{'turns/s':>9}{'x (1)':>8}{'x (2)':>8}")
    for r in rows:
        median = pct(r.ms, 0.5)
        print(
            f"{r.path:<{width}}{len(r.ms):>6}{median:>11.1f}{pct(r.ms, 0.95):>9.1f}{r.turns_per_s:>9.1f}"
            f"{median / floor:>7.1f}x{median / adk_sqlite:>7.1f}x"
        )
    print("(ms per turn, submit to done; x (1) and x (2): median over path 1's and path 2's median)")
    staged = [r for r in rows if r.breakdown]
    if staged:
        print("\nworker paths, median ms per stage (Turn row timestamps):")
        print(f"{'path':<{width}}{'queue':>9}{'run':>9}{'publish':>9}{'cpu/turn':>10}{'run/(3)':>9}{'run/(3r)':>9}")
        direct = {r.path.split()[0]: pct(r.ms, 0.5) for r in rows if not r.breakdown}
        for r in staged:
            b = r.breakdown
            cpu = f"{b['cpu']:>10.1f}" if "cpu" in b else f"{'':>10}"
            ratios = "".join(f"{b['run'] / direct[k]:>8.2f}x" if k in direct else f"{'':>9}" for k in ("3", "3r"))
            print(f"{r.path:<{width}}{b['queue']:>9.1f}{b['run']:>9.1f}{b['publish']:>9.1f}{cpu}{ratios}")
        print(
            "(queue: Turn row created -> claimed by a worker (commit, enqueue, broker, lease, claim);\n"
            " run: claimed -> finished (agent, Runner on DjangoSessionService, turn bookkeeping);\n"
            " publish: finished -> turn.finished received on the channel layer;\n"
            " cpu/turn: CPU ms of the celery worker's processes per turn (services only);\n"
            " run/(3), run/(3r): issue 12 target 3, the run stage over ADK's Runner on DjangoSessionService\n"
            " directly (3r: on the resumable App the worker runs, which stores an end-of-agent event too): <= 1.1x;\n"
            " target for queue: <= 3 ms on Redis with an idle worker)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=4, help="sessions per phase (default 4)")
    parser.add_argument("--turns-per-session", type=int, default=20, help="turns in each session (default 20)")
    parser.add_argument("--concurrency", type=int, default=2, help="worker threads/processes (default 2, as embedded)")
    parser.add_argument(
        "--streaming",
        action="store_true",
        help="also time worker turns with streaming on, as the browser sends them "
        "(the demo model then sleeps 20 ms per 3-word chunk)",
    )
    parser.add_argument("--services-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.services_child:
        django_setup(Path(tempfile.gettempdir()), migrate=False)
        services_child(args)
        return

    # Path 4 is embedded mode (memory broker, in-memory channel layer) whatever the environment says;
    # REDIS_URL is only for path 5, which runs in a child process.
    redis_url = os.environ.pop("REDIS_URL", "")
    database_url = os.environ.get("DATABASE_URL", "")
    with tempfile.TemporaryDirectory(prefix="adkweb-bench-") as tmpdir:
        tmp = Path(tmpdir)
        teardown = django_setup(tmp)
        try:
            from django.db import connection

            from agents_app.demo.setup import demo_setup

            demo_setup()
            started = time.perf_counter()
            n, k = args.sessions, args.turns_per_session
            rows = asyncio.run(direct_paths(tmp, n, k))
            rows += embedded_path(args)
            note = "path 5 skipped (set REDIS_URL and DATABASE_URL to run it)"
            if redis_url and database_url:
                try:
                    rows += services_path(args, redis_url, database_url)
                    note = ""
                except Exception as exc:  # noqa: BLE001 - report and keep the other figures
                    note = f"path 5 failed: {exc}"
            connection.close()
            print(
                f"turn: {APP} '{TEXT}' (1 tool call + 1 reply, {EVENTS_PER_TURN} events), offline demo model; "
                f"{n} sessions x {k} turns per phase"
            )
            print(
                f"Django on {connection.vendor} ({connection.settings_dict['NAME']}); ADK sqlite on a temp file; "
                f"worker concurrency {args.concurrency}"
            )
            paired = [r for r in rows if r.path == PAIRS]
            print_rows([r for r in rows if r.path != PAIRS])
            for row in paired:
                print_pairs(row)
            print(
                f"\nbuild_agent('{APP}') alone: {build_agent_ms():.1f} ms (paths 1-3 build the agent once; the "
                "worker once per configuration, agents_app.run_cache)"
            )
            connection.close()
            if note:
                print(note)
            print(f"total {time.perf_counter() - started:.1f} s")
        finally:
            teardown()


if __name__ == "__main__":
    main()
