"""Integration fixtures: real PostgreSQL and Redis (DATABASE_URL / REDIS_URL must be set, as
`make test` does) and a real `celery -A adkweb worker` subprocess on the test database."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
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


@pytest.fixture(autouse=True)
def _no_groups_of_earlier_tests() -> None:
    """Each test starts with no channel-layer group in Redis and no watch hint of this process
    (adkweb.watch_hints). A group's members live for a day (`group_expiry`) while the test database's
    ids start again at 1 in every run: a member left by an earlier test or run (a follower never
    discarded, a page of a process that died) made a conversation with its id "watched", so its turn
    rendered pages for nobody (test_drain_from_loop counted the renders on the database thread) or sent
    an end ahead for no follower (test_turn_publisher). Redis was flushed only where the worker
    subprocess started."""
    import redis
    from channels.layers import get_channel_layer

    from adkweb import watch_hints

    client = redis.Redis.from_url(settings.REDIS_URL)
    groups = list(client.scan_iter(match=get_channel_layer()._group_key("*"), count=1000))
    if groups:
        client.delete(*groups)
    client.close()
    with watch_hints._seen_lock:
        watch_hints._seen.clear()
        watch_hints._empty.clear()


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


@pytest.fixture
def fresh_connections() -> Iterator[None]:
    """For a test that checks what is prepared on a connection, what a cursor or libpq's calls send, or
        how many statements or round trips (or hops to the database thread) some work takes: it starts on
        new connections, and leaves new ones to the next test. The event loops' (agents_app.session_async:
        the worker loop's, agents_app.worker_loop, outlives a test) and Django's pooled ones keep what an
        earlier test prepared on them (agents_app.loop_prepared, agents_app.turn_sql), and which pooled
        connection a test gets is the pool's timing: such a test passed alone and failed after another
        (test_drain_sql, test_claim_raw, test_drain_from_loop). Statements are sent prepared
    (each connection's count of what it prepared, and of its losses, goes with it)."""
    _connections_closed()
    yield
    _connections_closed()


def _connections_closed() -> None:
    """Every loop's idle connections and this process's Django connections closed, its pool too (the
    next connection is a new one; the connection of the thread asgiref runs sync_to_async on included:
    so never call this from that thread, which would wait on itself, as test_pooler's `_point` would)."""
    from asgiref.sync import SyncToAsync
    from django.db import connections

    from agents_app import session_async

    session_async.close_all()
    SyncToAsync.single_thread_executor.submit(connections.close_all).result()
    connections.close_all()
    for conn in connections.all():
        if hasattr(conn, "close_pool"):
            conn.close_pool()
