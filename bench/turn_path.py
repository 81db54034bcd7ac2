"""Benchmark: what one agent turn costs at each layer of adkweb's path, printed side by side.
Not a test: it prints figures.

    .venv/bin/python bench/turn_path.py [--sessions 4] [--turns-per-session 20] [--concurrency 2]

The turn: stock_agent (offline demo model `demo-offline`) answers "What is the price of GOOG?" with
one tool call and one reply (4 stored events). It runs on:

  1. ADK's Runner + InMemorySessionService                  (the floor)
  2. ADK's Runner + SqliteSessionService                    (ADK's own durable store)
  3. ADK's Runner + our DjangoSessionService                (our store, called directly)
  4. services.message_send -> Turn row -> after-commit enqueue -> Celery worker threads on the
     memory broker (embedded mode) -> runner -> stored events, observed on the channel layer
  5. with REDIS_URL and DATABASE_URL set: the same as 4 with a `celery worker` subprocess
     (prefork) on Redis, observed on the Redis channel layer

Django runs on a throwaway SQLite file by default; with DATABASE_URL set (PostgreSQL) it creates a
test database (test_<name>), migrates it and drops it afterwards. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[1]
APP = "stock_agent"
USER = "requester"
TEXT = "What is the price of GOOG?"
EVENTS_PER_TURN = 4  # user message, function call, function response, reply
WAIT_SECONDS = 60.0  # a turn not finished by then is a failure of the run, not a data point


@dataclass
class Row:
    """One path's per-turn latencies (ms) and the wall time the turns took."""

    path: str
    ms: list[float]
    wall_s: float
    breakdown: dict[str, float] = field(default_factory=dict)  # median ms of each stage (worker paths)

    @property
    def turns_per_s(self) -> float:
        return len(self.ms) / self.wall_s if self.wall_s else float("nan")


def pct(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


# --- Django --------------------------------------------------------------------------------


def django_setup(tmp: Path, migrate: bool = True) -> Callable[[], None]:
    """Configure Django on a throwaway database; returns the teardown that removes it."""
    sys.path.insert(0, str(ROOT))
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


async def run_direct(name: str, service: Any, agent: Any, n_sessions: int, per_session: int) -> Row:
    """Turns one after another, session after session; one Runner for the whole run."""
    from google.adk.runners import Runner

    runner = Runner(app_name=APP, agent=agent, session_service=service)

    async def turn(session_id: str) -> float:
        started = time.perf_counter()
        yielded = [e async for e in runner.run_async(user_id=USER, session_id=session_id, new_message=user_message())]
        elapsed = (time.perf_counter() - started) * 1000
        assert len(yielded) == EVENTS_PER_TURN - 1, f"{name}: {len(yielded)} events yielded"
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
    assert len(stored.events) == EVENTS_PER_TURN * per_session, f"{name}: {len(stored.events)} events stored"
    return Row(name, ms, sum(ms) / 1000)


async def direct_paths(tmp: Path, n_sessions: int, per_session: int) -> list[Row]:
    from asgiref.sync import sync_to_async
    from django.db import connections
    from google.adk.sessions.in_memory_session_service import InMemorySessionService
    from google.adk.sessions.sqlite_session_service import SqliteSessionService

    from agents_app.agents import build_agent
    from agents_app.session_service import DjangoSessionService

    agent = await sync_to_async(build_agent)(APP)  # built once here; the worker builds it every turn
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
    ]
    await sync_to_async(connections.close_all)()
    return rows


# --- 4-5: the services path, through a Celery worker ---------------------------------------


class FinishedTurns:
    """Listens on the channel layer (as a browser's page does) for `turn.finished`, in a thread with
    its own event loop, and wakes whoever waits for that turn."""

    def __init__(self, session_pks: list[int]) -> None:
        self._pks = session_pks
        self._done: dict[int, tuple[float, float, str]] = {}  # turn id -> (perf_counter, time, status)
        self._cond = threading.Condition()
        self._ready = threading.Event()
        self._channel = ""
        self._thread = threading.Thread(target=lambda: asyncio.run(self._listen()), name="bench-listener", daemon=True)

    async def _listen(self) -> None:
        from channels.layers import get_channel_layer

        from agents_app.events import session_group

        layer = get_channel_layer()
        self._channel = await layer.new_channel()
        for pk in self._pks:
            await layer.group_add(session_group(pk), self._channel)
        asyncio.get_running_loop().call_soon(self._ready.set)  # runs once receive() below is waiting
        while True:
            message = await layer.receive(self._channel)
            if message["type"] == "bench.stop":
                break
            if message["type"] == "turn.finished":
                with self._cond:
                    self._done[message["turn_id"]] = (time.perf_counter(), time.time(), message["status"])
                    self._cond.notify_all()
        for pk in self._pks:
            await layer.group_discard(session_group(pk), self._channel)

    def __enter__(self) -> FinishedTurns:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the channel-layer listener did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        from asgiref.sync import async_to_sync
        from channels.layers import get_channel_layer

        async_to_sync(get_channel_layer().send)(self._channel, {"type": "bench.stop"})
        self._thread.join(10)

    def wait(self, turn_id: int) -> tuple[float, float]:
        with self._cond:
            if not self._cond.wait_for(lambda: turn_id in self._done, WAIT_SECONDS):
                raise RuntimeError(f"turn {turn_id} did not finish within {WAIT_SECONDS:.0f} s")
            at, wall, status = self._done[turn_id]
        if status != "done":
            raise RuntimeError(f"turn {turn_id} finished {status}")
        return at, wall


@dataclass
class Sample:
    turn_id: int
    ms: float  # submit (before message_send) -> turn.finished received
    observed: float  # time.time() of the receipt


def drive(session: Any, per_session: int, finished: FinishedTurns, streaming: bool, out: list[Sample]) -> None:
    """One session's turns, each sent when the previous one has finished (as a person chats)."""
    from django.db import connection

    from agents_app.services import message_send

    try:
        for _ in range(per_session):
            started = time.perf_counter()
            turn = message_send(session=session, text=TEXT, streaming=streaming)  # commits; enqueues after commit
            at, wall = finished.wait(turn.pk)
            out.append(Sample(turn.pk, (at - started) * 1000, wall))
    finally:
        connection.close()


def worker_phase(name: str, sessions: list[Any], per_session: int, parallel: bool, streaming: bool = False) -> Row:
    """Drive the sessions one after another (`parallel=False`) or all at once, one thread each."""
    from agents_app.models import StoredEvent, Turn

    samples: list[Sample] = []
    with FinishedTurns([s.pk for s in sessions]) as finished:
        started = time.perf_counter()
        if parallel:
            threads = [
                threading.Thread(target=drive, args=(s, per_session, finished, streaming, samples)) for s in sessions
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            for s in sessions:
                drive(s, per_session, finished, streaming, samples)
        wall = time.perf_counter() - started
    if len(samples) != len(sessions) * per_session:
        raise RuntimeError(f"{name}: {len(samples)} of {len(sessions) * per_session} turns finished")
    turns = Turn.objects.in_bulk([s.turn_id for s in samples])
    stages: dict[str, list[float]] = {"queue": [], "run": [], "publish": []}
    for s in samples:
        t = turns[s.turn_id]
        stages["queue"].append((t.started_at - t.created_at).total_seconds() * 1000)
        stages["run"].append((t.finished_at - t.started_at).total_seconds() * 1000)
        stages["publish"].append((s.observed - t.finished_at.timestamp()) * 1000)
    # The worker runs a resumable ADK App, which also stores a content-less end-of-agent marker per turn.
    rows = StoredEvent.objects.filter(session__in=[s.pk for s in sessions])
    stored = rows.count() - rows.filter(data__actions__end_of_agent=True).count()
    if stored != EVENTS_PER_TURN * len(samples):
        raise RuntimeError(f"{name}: {stored} events stored for {len(samples)} turns")
    return Row(name, [s.ms for s in samples], wall, {k: pct(v, 0.5) for k, v in stages.items()})


def new_sessions(count: int) -> list[Any]:
    from agents_app.services import session_create

    return [session_create(app_name=APP, user_id=USER) for _ in range(count)]


def warm_up(streaming: bool = False) -> None:
    """One turn outside the timings: the worker's first task imports and connects."""
    worker_phase("warm-up", new_sessions(1), 1, parallel=False, streaming=streaming)


def worker_phases(label: str, args: argparse.Namespace) -> list[Row]:
    n, k = args.sessions, args.turns_per_session
    rows = [
        worker_phase(f"{label}, 1 turn in flight", new_sessions(n), k, parallel=False),
        worker_phase(f"{label}, {n} sessions at once", new_sessions(n), k, parallel=True),
    ]
    if args.streaming:
        rows.append(
            worker_phase(f"{label}, 1 in flight, streaming", new_sessions(n), k, parallel=False, streaming=True)
        )
    return rows


def embedded_path(args: argparse.Namespace) -> list[Row]:
    from celery.contrib.testing.worker import start_worker
    from django.conf import settings

    from adkweb.celery import app

    assert settings.CELERY_BROKER_URL == "memory://", settings.CELERY_BROKER_URL
    with start_worker(
        app,
        pool="threads",
        concurrency=args.concurrency,
        perform_ping_check=False,
        loglevel="WARNING",
        shutdown_timeout=30,
    ):
        warm_up()
        return worker_phases("4 adkweb embedded", args)


# --- 5: services mode, a `celery worker` subprocess on Redis -------------------------------


def services_child(args: argparse.Namespace) -> None:
    """Runs in a child process whose settings point at Redis: start a worker, drive it, print JSON."""
    from django.conf import settings

    from adkweb.celery import app

    queue = os.environ["ADKWEB_BENCH_QUEUE"]
    app.conf.task_routes = {"agents_app.tasks.*": {"queue": queue}}  # a queue nobody else consumes
    assert app.amqp.router.route({}, "agents_app.tasks.session_drain")["queue"].name == queue
    assert settings.CELERY_BROKER_URL.startswith("redis"), settings.CELERY_BROKER_URL
    log = tempfile.TemporaryFile(mode="w+")  # the worker's output, shown only if the run fails
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "adkweb",
            "worker",
            "-Q",
            queue,
            "-n",
            f"{queue}@%h",
            "--pool",
            os.environ.get("BENCH_CELERY_POOL", "prefork"),
            "--concurrency",
            str(args.concurrency),
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=ROOT,
        env=os.environ.copy(),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        warm_up()  # also waits for the worker to be up
        rows = worker_phases("5 adkweb services (celery worker, Redis)", args)
    except BaseException:
        log.seek(0)
        sys.stderr.write("celery worker output (last 3000 characters):\n" + log.read()[-3000:])
        raise
    finally:
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
        log.close()
        # session_drain messages whose turns an earlier drain of the same session already ran are
        # still queued (each turn enqueues one drain; a drain runs every turn it finds): drop them
        # with the queue's keys, which are ours alone.
        import redis

        client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
        client.delete(queue, f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        client.close()
    print("BENCH-ROWS " + json.dumps([asdict(r) for r in rows]))


def services_path(args: argparse.Namespace, redis_url: str, database_url: str) -> list[Row]:
    """Run services_child in a subprocess on the same (test) database; its settings use Redis."""
    from django.db import connection

    parts = urlparse(database_url)
    test_url = urlunparse(parts._replace(path="/" + connection.settings_dict["NAME"]))
    tag = f"adkweb-bench-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    env = {
        **os.environ,
        "DATABASE_URL": test_url,
        "REDIS_URL": redis_url,
        "CHANNELS_PREFIX": tag,
        "ADKWEB_BENCH_QUEUE": tag,
    }
    cmd = [
        sys.executable,
        __file__,
        "--services-child",
        "--sessions",
        str(args.sessions),
        "--turns-per-session",
        str(args.turns_per_session),
        "--concurrency",
        str(args.concurrency),
    ]
    if args.streaming:
        cmd.append("--streaming")
    done = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True, timeout=300)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("BENCH-ROWS ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"services child exited {done.returncode}")
    return [Row(**r) for r in json.loads(lines[-1].removeprefix("BENCH-ROWS "))]


# --- Report ---------------------------------------------------------------------------------


def build_agent_ms(times: int = 20) -> float:
    """What the worker adds to every turn before ADK starts: building the agent from its config rows."""
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
        print(f"{'path':<{width}}{'queue':>9}{'run':>9}{'publish':>9}")
        for r in staged:
            b = r.breakdown
            print(f"{r.path:<{width}}{b['queue']:>9.1f}{b['run']:>9.1f}{b['publish']:>9.1f}")
        print(
            "(queue: Turn row created -> claimed by a worker (commit, enqueue, broker, lease, claim);\n"
            " run: claimed -> finished (build agent, Runner on DjangoSessionService, turn bookkeeping);\n"
            " publish: finished -> turn.finished received on the channel layer)"
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
            print_rows(rows)
            print(
                f"\nbuild_agent('{APP}') alone: {build_agent_ms():.1f} ms (the worker pays it every turn; "
                "paths 1-3 build the agent once)"
            )
            connection.close()
            if note:
                print(note)
            print(f"total {time.perf_counter() - started:.1f} s")
        finally:
            teardown()


if __name__ == "__main__":
    main()
