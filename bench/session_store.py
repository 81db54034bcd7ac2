"""Benchmark: adkweb's DjangoSessionService against ADK's InMemorySessionService and
SqliteSessionService, on one workload, printed side by side. Not a test: it prints figures.

    .venv/bin/python bench/session_store.py [--sessions 20] [--events 25] [--lists 20]

Django runs on a throwaway SQLite file by default; with DATABASE_URL set (PostgreSQL) it creates a
test database of its own (test_<name>_session_store_<pid>), migrates it and drops it afterwards. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
APP = "bench_app"


@dataclass
class Result:
    """ms per operation for each step of one backend's run."""

    backend: str
    ms_per_op: dict[str, float] = field(default_factory=dict)


def django_setup(tmp: Path) -> Callable[[], None]:
    """Configure Django on a throwaway database; returns the teardown that removes it."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "adkweb.settings")
    os.environ["ADKWEB_EMBEDDED_WORKER"] = "0"
    if not os.environ.get("DATABASE_URL"):
        os.environ["DATABASE_URL"] = f"sqlite:///{tmp / 'django.sqlite3'}"
    import django

    django.setup()
    from django.db import connection

    if connection.vendor == "sqlite":
        from django.core.management import call_command

        call_command("migrate", verbosity=0, interactive=False)
        return connection.close
    old_name = connection.settings_dict["NAME"]
    # Its own name: test_<name> is the integration tests' database, which autoclobber would drop.
    connection.settings_dict.setdefault("TEST", {})["NAME"] = f"test_{old_name}_session_store_{os.getpid()}"
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    return lambda: connection.creation.destroy_test_db(old_name, verbosity=0)


def make_event(i: int) -> Any:
    """A model reply of a few sentences; every fifth event also writes session and user state."""
    from google.adk.events.event import Event
    from google.adk.events.event_actions import EventActions
    from google.genai import types

    text = f"Reply {i}: " + "The quick brown fox jumps over the lazy dog. " * 6
    delta = {"counter": i, "user:last_seen": i} if i % 5 == 0 else {}
    return Event(
        invocation_id=f"inv-{i // 4}",
        author="user" if i % 2 == 0 else "bench_agent",
        content=types.Content(role="model", parts=[types.Part(text=text)]),
        actions=EventActions(state_delta=delta),
    )


async def timed(step: str, result: Result, calls: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run calls one after another and record ms per call under `step`."""
    started = time.perf_counter()
    out = [await call() for call in calls]
    result.ms_per_op[step] = (time.perf_counter() - started) * 1000 / max(len(calls), 1)
    return out


async def run_workload(name: str, service: Any, n_sessions: int, n_events: int, n_lists: int) -> Result:
    """Create sessions, append events, read them back in full and in part, list them."""
    from google.adk.sessions.base_session_service import GetSessionConfig

    result = Result(name)
    # Warm up outside the timings: ADK sqlite creates its schema, Django opens its connection.
    await service.get_session(app_name="warm_up", user_id="nobody", session_id="none")
    users = [f"user-{i % 4}" for i in range(n_sessions)]
    sessions = await timed(
        "create_session",
        result,
        [(lambda u=u: service.create_session(app_name=APP, user_id=u, state={"topic": "bench"})) for u in users],
    )
    appends = [(lambda s=s, i=i: service.append_event(s, make_event(i))) for i in range(n_events) for s in sessions]
    await timed("append_event", result, appends)
    got = await timed(
        "get_session (all events)",
        result,
        [(lambda s=s: service.get_session(app_name=APP, user_id=s.user_id, session_id=s.id)) for s in sessions],
    )
    assert all(len(g.events) == n_events for g in got), f"{name}: events missing"
    recent = GetSessionConfig(num_recent_events=10)
    await timed(
        "get_session (last 10)",
        result,
        [
            (lambda s=s: service.get_session(app_name=APP, user_id=s.user_id, session_id=s.id, config=recent))
            for s in sessions
        ],
    )
    listed = await timed(
        "list_sessions (one user)",
        result,
        [(lambda u=u: service.list_sessions(app_name=APP, user_id=u)) for u in (users * n_lists)[:n_lists]],
    )
    assert all(r.sessions for r in listed), f"{name}: nothing listed"
    await timed(
        "list_sessions (all users)",
        result,
        [(lambda: service.list_sessions(app_name=APP, user_id=None)) for _ in range(n_lists)],
    )
    return result


def print_table(results: list[Result], baseline: str, header: str) -> None:
    """ms/op per backend per step, plus how many times ADK's sqlite service's time ours takes."""
    names = [r.backend for r in results]
    base = next(r for r in results if r.backend == baseline)
    ours = results[-1]
    print(header)
    print(f"{'step':<27}" + "".join(f"{n:>16}" for n in names) + f"{'ours/sqlite':>13}")
    for step in base.ms_per_op:
        cells = "".join(f"{r.ms_per_op[step]:>13.3f} ms" for r in results)
        ratio = ours.ms_per_op[step] / base.ms_per_op[step] if base.ms_per_op[step] else float("nan")
        print(f"{step:<27}{cells}{ratio:>12.2f}x")
    print("(ms per operation, lower is better; ours/sqlite > 1 means DjangoSessionService is slower)")


async def main_async(args: argparse.Namespace, tmp: Path) -> list[Result]:
    """Run the same workload on each backend, one after another."""
    from asgiref.sync import sync_to_async
    from django.db import connections
    from google.adk.sessions.in_memory_session_service import InMemorySessionService
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    from agents_app.session_service import DjangoSessionService

    workload = (args.sessions, args.events, args.lists)
    results = [await run_workload("adk in-memory", InMemorySessionService(), *workload)]
    results.append(await run_workload("adk sqlite", SqliteSessionService(str(tmp / "adk.sqlite3")), *workload))
    results.append(await run_workload("adkweb django", DjangoSessionService(), *workload))
    await sync_to_async(connections.close_all)()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20, help="sessions to create (default 20)")
    parser.add_argument("--events", type=int, default=25, help="events appended to each session (default 25)")
    parser.add_argument("--lists", type=int, default=20, help="list_sessions calls per variant (default 20)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="adkweb-bench-") as tmpdir:
        tmp = Path(tmpdir)
        teardown = django_setup(tmp)
        try:
            from django.db import connection

            started = time.perf_counter()
            results = asyncio.run(main_async(args, tmp))
            where = f"{connection.vendor} ({connection.settings_dict['NAME']})"
            header = (
                f"{args.sessions} sessions x {args.events} events, {args.lists} lists; "
                f"DjangoSessionService on {where}; ADK sqlite on a temp file"
            )
            print_table(results, "adk sqlite", header)
            print(f"total {time.perf_counter() - started:.1f} s")
        finally:
            teardown()


if __name__ == "__main__":
    main()
