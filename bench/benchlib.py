"""What the bench scripts share: percentiles, throwaway PostgreSQL databases, server subprocesses
(started in their own process group, stopped by their pid) and their CPU and memory. Not app code."""

from __future__ import annotations

import math
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
BIN = Path(sys.executable).parent
# The PostgreSQL server and the Redis DB the benches use (never `adkweb` or Redis DB 13: CI's).
PG_SERVER = os.environ.get("BENCH_PG", "postgres://postgres@127.0.0.1:5432")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/5")
# Database names start with this (BENCH_DB_PREFIX, e.g. "adkweb_bench_alice"): two people's runs on one
# server must not drop each other's databases.
DB_PREFIX = os.environ.get("BENCH_DB_PREFIX", "adkweb_bench")
assert DB_PREFIX.startswith("adkweb_bench"), "BENCH_DB_PREFIX must start with adkweb_bench"
CLK_TCK = os.sysconf("SC_CLK_TCK")
# The Celery pool of the services-mode workers the benches start (BENCH_CELERY_POOL: prefork, threads;
# by default production's, settings.CELERY_WORKER_POOL).
CELERY_POOL = os.environ.get("BENCH_CELERY_POOL", "threads")


def celery_worker_cmd(concurrency: int = 2) -> list[str]:
    """The agents-queue Celery worker of services mode, as the Procfile runs it, on the benches' pool."""
    pool = ["--pool", CELERY_POOL, "--concurrency", str(concurrency)]
    return [str(BIN / "celery"), "-A", "adkweb", "worker", "-Q", "agents", *pool, "--loglevel", "WARNING"]


def enqueue_module() -> Any:
    """The module of the tree under test that holds session_enqueue and its senders (_send_wake,
    _send_drain): agents_app.enqueue, or agents_app.services in trees before that split (a bench's
    --base or --tree run of an older tree). Benches replace session_enqueue there."""
    from importlib import import_module

    try:
        return import_module("agents_app.enqueue")
    except ModuleNotFoundError:
        return import_module("agents_app.services")


def pct(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..1); nan for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_url(name: str) -> str:
    return f"{PG_SERVER.rstrip('/')}/{name}"


def _pg_admin():  # noqa: ANN202 - psycopg is imported lazily
    import psycopg

    return psycopg.connect(pg_url("postgres"), autocommit=True)


def pg_exists(name: str) -> bool:
    with _pg_admin() as conn:
        return conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is not None


def pg_drop(name: str) -> None:
    """Drop a bench database (its name must say so), ending its leftover connections first."""
    assert name.startswith("adkweb_bench_") or name.startswith("test_adkweb_bench_"), name
    with _pg_admin() as conn:
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", [name])
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def pg_create(name: str) -> str:
    """A fresh, empty bench database; returns its URL."""
    pg_drop(name)
    with _pg_admin() as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return pg_url(name)


def redis_flush(url: str = REDIS_URL) -> None:
    """Empty the bench's own Redis DB (queues and channel-layer keys left by an earlier run)."""
    import redis

    db = int(urlparse(url).path.lstrip("/") or 0)
    assert db != 13, "Redis DB 13 is CI's"
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()


# Services-mode processes need a secret key (adkweb.settings refuses to start without one).
BENCH_SECRET_KEY = "bench-only-secret-key-not-for-any-deployment-0123456789"


def adkweb_env(database_url: str, redis_url: str = "", root: Path = ROOT, **extra: str) -> dict[str, str]:
    """The environment of an adkweb process: services mode with a Redis URL, embedded mode without.
    `root`: the source tree it runs (another checkout, to compare two versions in one run)."""
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env.update(
        DATABASE_URL=database_url,
        DJANGO_SETTINGS_MODULE="adkweb.settings",
        DJANGO_DEBUG="false",
        DJANGO_SECRET_KEY=BENCH_SECRET_KEY,
        DJANGO_ALLOWED_HOSTS="127.0.0.1,localhost",
        ADKWEB_STATIC_MANIFEST="false",  # pages from the source folders: no collectstatic for a bench
        LOG_LEVEL="WARNING",
        PYTHONPATH=os.pathsep.join([str(root), str(BENCH / "agents")]),
    )
    if redis_url:
        env["REDIS_URL"] = redis_url
    if CELERY_POOL != "threads":  # the wake-up listener needs the threads pool: Celery's task per enqueue
        env["ADKWEB_WAKE_LIST"] = "false"
    env.update(extra)
    return env


def manage(env: dict[str, str], *args: str, root: Path = ROOT) -> str:
    """Run a manage.py command (of the source tree `root`); its stdout."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=root, env=env, capture_output=True, text=True, timeout=300
    )
    if done.returncode:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done.stdout


class Server:
    """A subprocess in its own process group, its output in a temp file (shown if it fails)."""

    def __init__(
        self, name: str, cmd: list[str], env: dict[str, str], port: int | None = None, cwd: Path = ROOT
    ) -> None:
        self.name, self.cmd, self.env, self.port, self.cwd = name, cmd, env, port, cwd
        self.log = tempfile.NamedTemporaryFile(mode="w+", prefix=f"bench-{name}-", suffix=".log", delete=False)
        self.proc: subprocess.Popen | None = None

    def start(self) -> Server:
        self.proc = subprocess.Popen(
            self.cmd, cwd=self.cwd, env=self.env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True
        )
        return self

    def wait_port(self, timeout: float = 60) -> Server:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode}:\n{self.tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not listen on {self.port} within {timeout:.0f} s:\n{self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-chars:]

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            self._cleanup()
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)  # our own group: the server and its children
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        except ProcessLookupError:
            pass
        self._cleanup()

    def _cleanup(self) -> None:
        self.log.close()
        Path(self.log.name).unlink(missing_ok=True)


def process_tree(pid: int) -> list[int]:
    """pid and its descendants (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process and its live descendants."""
    total = 0
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return total / CLK_TCK


def rss_mb(pid: int, tree: bool = True) -> float:
    """Resident memory (MiB) of a process (and its descendants)."""
    total = 0
    for p in process_tree(pid) if tree else [pid]:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024
