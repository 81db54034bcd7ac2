"""bench/turn_path.py's worker paths (4: embedded mode, 5: a `celery worker` on Redis) and what
both files share. Not a test: it prints figures (run bench/turn_path.py)."""

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


# --- 4-5: the services path, through a Celery worker ---------------------------------------


class FinishedTurns:
    """Listens on the channel layer (as a browser's page does) for `turn.finished`, in a thread with
    its own event loop, and wakes whoever waits for that turn."""

    def __init__(self, session_pks: list[int], timeout: float = WAIT_SECONDS) -> None:
        self._pks, self._timeout = session_pks, timeout
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
            if message["type"] == "turn.finished" and not message.get("ahead"):
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
            if not self._cond.wait_for(lambda: turn_id in self._done, self._timeout):
                raise RuntimeError(f"turn {turn_id} did not finish within {self._timeout:.0f} s")
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


def worker_phase(
    name: str,
    sessions: list[Any],
    per_session: int,
    parallel: bool,
    streaming: bool = False,
    timeout: float = WAIT_SECONDS,
) -> Row:
    """Drive the sessions one after another (`parallel=False`) or all at once, one thread each."""
    from agents_app.models import StoredEvent, Turn

    samples: list[Sample] = []
    with FinishedTurns([s.pk for s in sessions], timeout) as finished:
        started, cpu = time.perf_counter(), worker_cpu_ms()
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
        wall, cpu = time.perf_counter() - started, worker_cpu_ms() - cpu
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
    breakdown = {k: pct(v, 0.5) for k, v in stages.items()}
    if WORKER_PID:  # services: CPU time of the worker's processes per turn (steadier than wall time)
        breakdown["cpu"] = cpu / len(samples)
    return Row(name, [s.ms for s in samples], wall, breakdown)


WORKER_PID = 0  # the `celery worker` subprocess of path 5 (in the services child)


def worker_cpu_ms() -> float:
    """CPU time (user + system) of the worker process and its children (a prefork pool), in ms."""
    if not WORKER_PID:
        return 0.0
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        parents[pid], ticks[pid] = int(fields[1]), int(fields[11]) + int(fields[12])
    tree, total = {WORKER_PID}, 0
    for pid in sorted(parents):  # children have higher pids than their parents here
        if pid in tree or parents[pid] in tree:
            tree.add(pid)
            total += ticks[pid]
    return total * 1000 / os.sysconf("SC_CLK_TCK")


def new_sessions(count: int) -> list[Any]:
    from agents_app.services import session_create

    return [session_create(app_name=APP, user_id=USER) for _ in range(count)]


def warm_up(streaming: bool = False) -> None:
    """One turn outside the timings: the worker's first task imports and connects (a worker starting
    on a loaded machine may take minutes)."""
    worker_phase("warm-up", new_sessions(1), 1, parallel=False, streaming=streaming, timeout=300)


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
            os.environ.get("BENCH_CELERY_POOL", "threads"),
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
    global WORKER_PID
    WORKER_PID = worker.pid
    try:
        warm_up()  # also waits for the worker to be up
        rows = worker_phases("5 adkweb services (celery worker, Redis)", args)
        from turn_path_pairs import pairs_phase  # it imports this module

        rows.append(pairs_phase(args.sessions, args.turns_per_session))
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
    if os.environ.get("BENCH_CELERY_POOL", "threads") != "threads":  # wake-ups need the threads pool
        env["ADKWEB_WAKE_LIST"] = "false"
    cmd = [
        sys.executable,
        str(ROOT / "bench" / "turn_path.py"),
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
