"""Integration fixtures: real PostgreSQL and Redis (DATABASE_URL / REDIS_URL must be set, as
`make test` does) and a real `celery -A adkweb worker` subprocess on the test database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session", autouse=True)
def _require_services():
    engine = settings.DATABASES["default"]["ENGINE"]
    if "postgresql" not in engine or not settings.REDIS_URL:
        pytest.fail("Integration tests need DATABASE_URL (PostgreSQL) and REDIS_URL: run them through `make test`.")


def _redis_flush() -> None:
    import redis

    redis.Redis.from_url(settings.REDIS_URL).flushdb()


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker):
    """A real Celery worker process, pointed at the test database pytest-django created."""
    _redis_flush()
    db = settings.DATABASES["default"]
    url = f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "adkweb.settings",
        "ADKWEB_EMBEDDED_WORKER": "0",
        "ADKWEB_REQUEUE_AFTER_SECONDS": "1",
        "PYTHONPATH": str(ROOT),
    }
    log = open(ROOT / f".celery-worker-{os.getpid()}.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "adkweb",
            "worker",
            "-Q",
            "agents",  # the pool production runs: settings.CELERY_WORKER_POOL (threads)
            "--concurrency",
            "4",
            "--loglevel",
            "INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    _wait_ready(proc, Path(log.name))
    yield proc
    stop(proc)
    log.close()
    Path(log.name).unlink(missing_ok=True)


def _wait_ready(proc: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"celery worker exited: {log.read_text()[-3000:]}")
        if "ready." in log.read_text():
            return
        time.sleep(0.2)
    raise RuntimeError(f"celery worker not ready: {log.read_text()[-3000:]}")


def beat_start(schedule_dir: Path, every: float = 1.0) -> tuple[subprocess.Popen, Path]:
    """A real `celery beat` subprocess on the test database, sending the deadline sweep every
    `every` seconds (and the rest of the schedule at its own pace). Stop it with beat_stop."""
    db = settings.DATABASES["default"]
    url = f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "REDIS_URL": settings.REDIS_URL,
        "DJANGO_SETTINGS_MODULE": "adkweb.settings",
        "ADKWEB_EMBEDDED_WORKER": "0",
        "ADKWEB_DEADLINE_SWEEP_SECONDS": str(every),
        "PYTHONPATH": str(ROOT),
    }
    log = schedule_dir / "beat.log"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "adkweb",
            "beat",
            "--loglevel",
            "INFO",
            "--schedule",
            str(schedule_dir / "beat-schedule"),
        ],
        cwd=ROOT,
        env=env,
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while "beat: Starting" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"celery beat did not start: {log.read_text()[-3000:]}")
        time.sleep(0.2)
    return proc, log


def beat_stop(proc: subprocess.Popen) -> None:
    stop(proc)


def stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """Terminate a subprocess; kill it if it has not exited within `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture
def sweeper(worker, tmp_path):
    """`celery beat` as services mode runs it (a subprocess), sending the deadline sweep every second."""
    proc, log = beat_start(tmp_path)
    yield proc
    beat_stop(proc)
    assert proc.returncode is not None, log.read_text()[-2000:]


@pytest.fixture
def worker(transactional_db, celery_worker_process):
    """Use in tests that run turns: committed data, the worker subprocess running."""
    yield celery_worker_process
    from agents_app.models import Turn
    from tests.conftest import wait_for

    wait_for(
        lambda: not Turn.objects.filter(status__in=["queued", "running"]).exists(),
        timeout=30,
        what="turns to finish before teardown",
    )


@pytest.fixture(scope="session", autouse=True)
def _close_connection_pools(django_db_setup):
    """Close this process's PostgreSQL pool (and the session store's event-loop connections) before
    the test database is dropped (an idle connection would keep it "accessed by other users")."""
    yield
    from django.db import connections

    from agents_app import session_async

    for conn in connections.all():
        if hasattr(conn, "close_pool"):
            conn.close_pool()
    session_async.close_all()  # the session store's event-loop connections, likewise
