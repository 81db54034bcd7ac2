"""Benchmark: adkweb's DjangoSessionService against ADK's InMemorySessionService, SqliteSessionService
and (on PostgreSQL) DatabaseSessionService, per operation and on the seed flow, printed side by side.
Not a test: it prints figures.

    .venv/bin/python bench/session_store.py [--sessions 20] [--events 25] [--lists 20] [--flows 30]

Django runs on a throwaway SQLite file by default; with DATABASE_URL set (PostgreSQL) it creates a
test database of its own (test_<name>_session_store_<pid>), migrates it and drops it afterwards, and
ADK's DatabaseSessionService (SQLAlchemy + asyncpg: `make bench-install`) runs on the same server in a
database of its own (<BENCH_DB_PREFIX>_store_adk, default adkweb_bench_store_adk), also dropped
afterwards. See bench/README.md.
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
# Its own database on the server, named after BENCH_DB_PREFIX (two people's runs do not collide).
ADK_DB = os.environ.get("BENCH_DB_PREFIX", "adkweb_bench") + "_store_adk"
SEED_TEXT = "Please reimburse 200$ for meals"


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
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-secret-key-not-for-any-deployment-0123456789")
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


async def run_workload(
    name: str, service: Any, n_sessions: int, n_events: int, n_lists: int, app: str = "bench_app"
) -> Result:
    """Create sessions, append events, read them back in full and in part, list them (in app `app`)."""
    from google.adk.sessions.base_session_service import GetSessionConfig

    result = Result(name)
    # Warm up outside the timings: ADK sqlite creates its schema, Django opens its connection.
    await service.get_session(app_name="warm_up", user_id="nobody", session_id="none")
    users = [f"user-{i % 4}" for i in range(n_sessions)]
    sessions = await timed(
        "create_session",
        result,
        [(lambda u=u: service.create_session(app_name=app, user_id=u, state={"topic": "bench"})) for u in users],
    )
    appends = [(lambda s=s, i=i: service.append_event(s, make_event(i))) for i in range(n_events) for s in sessions]
    await timed("append_event", result, appends)
    got = await timed(
        "get_session (all events)",
        result,
        [(lambda s=s: service.get_session(app_name=app, user_id=s.user_id, session_id=s.id)) for s in sessions],
    )
    assert all(len(g.events) == n_events for g in got), f"{name}: events missing"
    recent = GetSessionConfig(num_recent_events=10)
    await timed(
        "get_session (last 10)",
        result,
        [
            (lambda s=s: service.get_session(app_name=app, user_id=s.user_id, session_id=s.id, config=recent))
            for s in sessions
        ],
    )
    listed = await timed(
        "list_sessions (one user)",
        result,
        [(lambda u=u: service.list_sessions(app_name=app, user_id=u)) for u in (users * n_lists)[:n_lists]],
    )
    assert all(r.sessions for r in listed), f"{name}: nothing listed"
    await timed(
        "list_sessions (all users)",
        result,
        [(lambda: service.list_sessions(app_name=app, user_id=None)) for _ in range(n_lists)],
    )
    await timed(
        "delete_session",
        result,
        [(lambda s=s: service.delete_session(app_name=app, user_id=s.user_id, session_id=s.id)) for s in sessions],
    )
    return result


async def seed_turn(runner: Any, session: Any, message: Any, drain: bool) -> list[Any]:
    """One turn of the seed flow; `drain`: its publishes queued while it goes on, as a worker runs it,
    and waited for at its end."""
    from agents_app import events as live

    if not drain:
        return [e async for e in runner.run_async(user_id="seed", session_id=session.id, new_message=message)]
    published = live.turn_publisher.set(live.TurnPublisher())
    try:
        return [e async for e in runner.run_async(user_id="seed", session_id=session.id, new_message=message)]
    finally:
        await live.publishes_sent()
        live.turn_publisher.reset(published)


async def seed_flows(results: list[Result], services: list[Any], n_flows: int) -> None:
    """The seed's flow through ADK's Runner on each store, the stores taking turns flow by flow: create
    a session, the message (-> a long-running call), the approval (-> reimburse): median and p95 per flow.
    Each flow twice: its turns called bare, and each turn as a worker's drain runs it (agents_app.runner:
    the turn's publishes queued on a `TurnPublisher` while it goes on, the turn timed until they have
    all left). ADK's stores publish nothing, so for them the two are the same code."""
    from google.adk.runners import Runner
    from google.genai import types

    sys.path.insert(0, str(ROOT / "bench" / "agents"))
    from bench_reimbursement.agent import root_agent

    async def one(service: Any, runner: Any, drain: bool) -> float:
        started = time.perf_counter()
        session = await service.create_session(app_name=APP, user_id="seed")
        text = types.Content(role="user", parts=[types.Part(text=SEED_TEXT)])
        events = await seed_turn(runner, session, text, drain)
        call = next(c for e in events for c in e.get_function_calls() if c.id in (e.long_running_tool_ids or ()))
        fr = types.FunctionResponse(id=call.id, name=call.name, response={"status": "approved"})
        answer = types.Content(role="user", parts=[types.Part(function_response=fr)])
        events = await seed_turn(runner, session, answer, drain)
        final = "".join(p.text or "" for e in events for p in (e.content.parts if e.content else None) or [])
        assert "reimbursed $200.00" in final, final
        return (time.perf_counter() - started) * 1000

    runners = [Runner(app_name=APP, agent=root_agent, session_service=svc) for svc in services]
    ms: dict[bool, list[list[float]]] = {False: [[] for _ in services], True: [[] for _ in services]}
    for i in range(n_flows + 1):  # the first round is a warm-up
        for drain in (i % 2 == 0, i % 2 == 1):
            for k in [(i + j) % len(services) for j in range(len(services))]:
                elapsed = await one(services[k], runners[k], drain)
                if i:
                    ms[drain][k].append(elapsed)
    for drain, label in ((False, "seed flow"), (True, "seed flow, as a drain")):
        for result, values in zip(results, ms[drain], strict=True):
            ordered = sorted(values)
            result.ms_per_op[f"{label} (median)"] = ordered[len(ordered) // 2]
            result.ms_per_op[f"{label} (p95)"] = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]


def print_table(results: list[Result], baselines: list[str], header: str) -> None:
    """ms/op per backend per step, plus how many times each ADK durable store's time ours takes."""
    names = [r.backend for r in results]
    bases = [next(r for r in results if r.backend == b) for b in baselines]
    ours = results[-1]
    print(header)
    ratio_heads = "".join(f"{'ours/' + b.removeprefix('adk ').removeprefix('adkweb '):>15}" for b in baselines)
    print(f"{'step':<32}" + "".join(f"{n:>16}" for n in names) + ratio_heads)
    for step in bases[0].ms_per_op:
        cells = "".join(f"{r.ms_per_op[step]:>13.3f} ms" for r in results)
        ratios = "".join(
            f"{ours.ms_per_op[step] / b.ms_per_op[step]:>14.2f}x" if b.ms_per_op[step] else f"{'-':>15}" for b in bases
        )
        print(f"{step:<32}{cells}{ratios}")
    print("(ms per operation, lower is better; ours/X > 1 means DjangoSessionService is slower than X;")
    print(" seed flow: Runner on the store: create session, message -> ticket, approval -> reimburse, 8 events;")
    print(" as a drain: each turn's publishes queued while it goes on, as a worker runs it, timed until sent)")


async def main_async(args: argparse.Namespace, tmp: Path, adk_db_url: str) -> list[Result]:
    """Run the same workload on each backend, interleaved."""
    from asgiref.sync import sync_to_async
    from django.db import connections
    from google.adk.sessions.in_memory_session_service import InMemorySessionService
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    from agents_app import session_async
    from agents_app.session_service import DjangoSessionService

    workload = (args.sessions, args.events, args.lists)
    backends: list[tuple[str, Any]] = []
    if not args.pg_only:
        backends.append(("adk in-memory", InMemorySessionService()))
        backends.append(("adk sqlite", SqliteSessionService(str(tmp / "adk.sqlite3"))))
    if adk_db_url:
        from google.adk.sessions.database_session_service import DatabaseSessionService

        backends.append(("adk database", DatabaseSessionService(db_url=adk_db_url)))
    if args.compare_with:
        backends.append(("adkweb before", earlier_service(args.compare_with)))
    if args.without_hooks:
        backends.append(("adkweb no hooks", without_hooks()))
    backends.append(("adkweb django", DjangoSessionService()))
    # Each repetition runs the workload on every backend, in a rotating order (in an app of its own, so
    # lists do not grow); each step's figure is its median over the repetitions. Load from the rest of
    # the machine then falls on all backends alike.
    runs: list[list[Result]] = [[] for _ in backends]
    for rep in range(args.repeat):
        for k in [(rep + j) % len(backends) for j in range(len(backends))]:
            name, service = backends[k]
            runs[k].append(await run_workload(name, service, *workload, app=f"{APP}_{rep}"))
    results = []
    for (name, _), reps in zip(backends, runs, strict=True):
        steps = reps[0].ms_per_op
        results.append(Result(name, {step: sorted(r.ms_per_op[step] for r in reps)[len(reps) // 2] for step in steps}))
    await seed_flows(results, [service for _, service in backends], args.flows)
    for _, service in backends:
        if hasattr(service, "close"):
            await service.close()
    await sync_to_async(connections.close_all)()
    session_async.close_all()
    return results


def without_hooks() -> Any:
    """Our store with no event hooks: no tickets (approvals), so what the store itself costs."""
    from agents_app.session_service import DjangoSessionService

    class NoHooks(DjangoSessionService):
        def _write(self, session: Any, event: Any, new: Any, hooks: Any, lease: Any) -> Any:
            return super()._write(session, event, new, [], lease)

    return NoHooks()


def earlier_service(path: str) -> Any:
    """DjangoSessionService from another version of agents_app/session_service.py (e.g. `git show
    main:agents_app/session_service.py > /tmp/before.py`), on the same database, with the same event
    hooks (approvals): before and after side by side in one run."""
    import importlib.util

    from agents_app import session_hooks

    name = "agents_app._session_service_before"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    for hook, wants, rider in session_hooks.registered():  # with their filters and riders, as registered here
        module.register_event_hook(hook, wants, rider)
    return module.DjangoSessionService()


def adk_database_url() -> str:
    """ADK's DatabaseSessionService on the Django database's PostgreSQL server, in a database of its own."""
    from urllib.parse import urlparse, urlunparse

    import psycopg

    parts = urlparse(os.environ["DATABASE_URL"])
    admin = urlunparse(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{ADK_DB}"')
        conn.execute(f'CREATE DATABASE "{ADK_DB}"')
    return urlunparse(parts._replace(scheme="postgresql+asyncpg", path="/" + ADK_DB))


def adk_database_drop() -> None:
    from urllib.parse import urlparse, urlunparse

    import psycopg

    admin = urlunparse(urlparse(os.environ["DATABASE_URL"])._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [ADK_DB])
        conn.execute(f'DROP DATABASE IF EXISTS "{ADK_DB}"')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=20, help="sessions to create (default 20)")
    parser.add_argument("--events", type=int, default=25, help="events appended to each session (default 25)")
    parser.add_argument("--lists", type=int, default=20, help="list_sessions calls per variant (default 20)")
    parser.add_argument("--flows", type=int, default=30, help="seed flows through the Runner per store (default 30)")
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of the workload, interleaved (default 3)")
    parser.add_argument(
        "--compare-with",
        metavar="FILE",
        default="",
        help="another version of agents_app/session_service.py, run as 'adkweb before' alongside",
    )
    parser.add_argument(
        "--pg-only", action="store_true", help="only ADK's DatabaseSessionService and ours (PostgreSQL): quicker"
    )
    parser.add_argument(
        "--without-hooks",
        action="store_true",
        help="also our store without event hooks ('adkweb no hooks': no tickets), to split the seed flow",
    )
    args = parser.parse_args()
    if args.pg_only and not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")):
        parser.error("--pg-only compares on PostgreSQL: set DATABASE_URL=postgres://... (a database it may create)")
    with tempfile.TemporaryDirectory(prefix="adkweb-bench-") as tmpdir:
        tmp = Path(tmpdir)
        teardown = django_setup(tmp)
        adk_db_url = ""
        try:
            from django.db import connection

            if connection.vendor == "postgresql":
                adk_db_url = adk_database_url()
            started = time.perf_counter()
            results = asyncio.run(main_async(args, tmp, adk_db_url))
            where = f"{connection.vendor} ({connection.settings_dict['NAME']})"
            header = (
                f"{args.sessions} sessions x {args.events} events, {args.lists} lists (median of {args.repeat} "
                f"interleaved repetitions), {args.flows} seed flows (interleaved); "
                f"DjangoSessionService on {where}; ADK sqlite on a temp file"
                + (f"; ADK DatabaseSessionService on {ADK_DB} (asyncpg)" if adk_db_url else "")
            )
            baselines = ([] if args.pg_only else ["adk sqlite"]) + (["adk database"] if adk_db_url else [])
            print_table(results, baselines + (["adkweb before"] if args.compare_with else []), header)
            print(f"total {time.perf_counter() - started:.1f} s")
        finally:
            teardown()
            if adk_db_url:
                adk_database_drop()


if __name__ == "__main__":
    main()
