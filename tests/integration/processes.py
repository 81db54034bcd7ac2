"""Real processes for crash and outage tests: a Redis server of the test's own (so it can be
stopped and restarted without touching anyone else's), `celery worker` and `celery beat`
subprocesses on the test database, and a producer that sends tasks to that Redis only.

Default engine settings unless a test says otherwise: these tests measure what a deployment
with the defaults promises.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
ENGINE_ENV = (  # left at their defaults in the subprocesses
    "ADKWEB_SESSION_LEASE_SECONDS",
    "ADKWEB_LEASE_RENEW_SECONDS",
    "ADKWEB_REQUEUE_AFTER_SECONDS",
    "ADKWEB_TURN_SOFT_TIME_LIMIT",
    "ADKWEB_TURN_HARD_TIME_LIMIT",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """redis-server on a free port, no persistence; stop() and start() again on the same port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        args = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


def database_url() -> str:
    db = settings.DATABASES["default"]
    return f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def service_env(redis_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENGINE_ENV}
    env.update(
        DATABASE_URL=database_url(),
        REDIS_URL=redis_url,
        DJANGO_SETTINGS_MODULE="adkweb.settings",
        ADKWEB_EMBEDDED_WORKER="0",
        PYTHONPATH=str(ROOT),
        **extra,
    )
    return env


class Service:
    """A subprocess (celery worker or beat) whose log is read to know when it is ready."""

    def __init__(self, args: list[str], env: dict[str, str], ready: str) -> None:
        self.args, self.env, self.ready = args, env, ready
        self.log = Path(tempfile.mkstemp(prefix="adkweb-svc-", suffix=".log")[1])
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> Service:
        out = open(self.log, "a")
        self.proc = subprocess.Popen(self.args, cwd=ROOT, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.args[3]} exited: {self.text()[-3000:]}")
            if self.ready in self.text():
                return self
            time.sleep(0.2)
        raise RuntimeError(f"{self.args[3]} not ready: {self.text()[-3000:]}")

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no cleanup, no acks, no lease release, as when a machine dies."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.unlink(missing_ok=True)


def worker(env: dict[str, str], concurrency: int = 8) -> Service:
    """The pool production runs (settings.CELERY_WORKER_POOL, as the Procfile's worker: no --pool)."""
    args = [sys.executable, "-m", "celery", "-A", "adkweb", "worker", "-Q", "agents"]
    args += ["--concurrency", str(concurrency), "--loglevel", "INFO", "--without-gossip", "--without-mingle"]
    return Service(args, env, ready="ready.")


def beat(env: dict[str, str]) -> Service:
    schedule = tempfile.mktemp(prefix="adkweb-beat-")
    args = [sys.executable, "-m", "celery", "-A", "adkweb", "beat", "--loglevel", "INFO", "--schedule", schedule]
    return Service(args, env, ready="beat: Starting")


def producer(redis_url: str) -> Any:
    """A Celery app that sends our tasks to this Redis only (not the test run's shared broker). Not made
    the current app: shared tasks' `.delay()` goes to the current app, and later tests would send to
    this test's Redis, stopped by then (test_engine_flows.py's sweeper scenarios did, after this)."""
    from celery import Celery

    app = Celery("adkweb-test-producer", broker=redis_url, set_as_current=False)
    app.conf.task_default_queue = "agents"
    return app


def send_drain(app: Any, session_pk: int) -> None:
    app.send_task("agents_app.tasks.session_drain", args=[session_pk], queue="agents")


@contextmanager
def crashy_services(
    tmp_path: Path, settings: Any, monkeypatch: Any, slow: float, **extra: str
) -> Iterator[tuple[dict[str, str], RedisServer, list[Service]]]:
    """A Redis of the test's own (this process's wake-ups go there) and the environment for services
    (worker, beat, web) that run the crashy scenario agent, its `slow` tool sleeping `slow` seconds. The
    services the test appends to the list are killed at the end, then that Redis is stopped."""
    from adkweb.per_process import PerProcess
    from agents_app import wake
    from tests.engine_scenarios import crashy

    settings.ADKWEB_CODE_AGENTS = {**settings.ADKWEB_CODE_AGENTS, crashy.APP_NAME: crashy.DOTTED}
    monkeypatch.setenv("ADKWEB_TEST_GATE_DIR", str(tmp_path))
    server = RedisServer().start()
    settings.REDIS_URL = server.url
    monkeypatch.setattr(wake, "_clients", PerProcess(wake._new_client))  # a client for that Redis
    env = service_env(
        server.url,
        ADKWEB_CODE_AGENTS=f"{crashy.APP_NAME}={crashy.DOTTED}",
        ADKWEB_TEST_GATE_DIR=str(tmp_path),
        ADKWEB_TEST_SLOW_SECONDS=str(slow),
        **extra,
    )
    started: list[Service] = []
    try:
        yield env, server, started
    finally:
        for service in started:
            service.kill()
            service.stop()
        server.stop()
