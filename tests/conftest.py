"""Shared fixtures: demo users and agents, a real in-process Celery worker, and waiting helpers."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest


def wait_for(predicate: Callable[[], Any], timeout: float = 15.0, interval: float = 0.05, what: str = "") -> Any:
    """Poll until predicate() is truthy; fail the test with `what` if it never is."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


@pytest.fixture
def demo(db) -> dict[str, Any]:
    """Demo groups, users (admin, approver, requester, observer) and agents."""
    from django.contrib.auth.models import User

    from agents_app.demo.setup import demo_setup

    demo_setup()
    return {u.username: u for u in User.objects.all()}


@pytest.fixture(scope="session")
def _celery_worker_thread(django_db_setup, django_db_blocker):
    """A real Celery worker (threads pool, memory broker) in this process, for the whole run."""
    from celery.contrib.testing.worker import start_worker

    from adkweb.celery import app

    with django_db_blocker.unblock():
        with start_worker(
            app, pool="threads", concurrency=2, perform_ping_check=False, loglevel="WARNING", shutdown_timeout=30
        ):
            yield app


@pytest.fixture
def worker(transactional_db, _celery_worker_thread):
    """Use in tests that run turns: data is committed so the worker threads see it. Waits for
    every turn to finish before the database is flushed."""
    yield _celery_worker_thread
    from agents_app.models import Turn

    wait_for(
        lambda: not Turn.objects.filter(status__in=["queued", "running"]).exists(),
        timeout=30,
        what="turns to finish before teardown",
    )


@pytest.fixture
def sweeper(worker):
    """What `celery beat` does in services mode: the embedded sweeper thread sending the beat
    schedule's tasks (deadlines, owed turns) to the in-process worker, every half second."""
    from agents_app.embedded import sweeper_start

    stop = sweeper_start(0.5)
    yield stop
    stop.set()


@pytest.fixture
def wait() -> Callable[..., Any]:
    return wait_for


@pytest.fixture
async def service() -> AsyncIterator[Any]:
    """The session store (DjangoSessionService); the ORM thread's connection is closed afterwards so
    that the test database can be dropped."""
    from asgiref.sync import sync_to_async
    from django.db import connections

    from agents_app.session_service import DjangoSessionService

    yield DjangoSessionService()
    await sync_to_async(connections.close_all)()


_OTHERS_IN_A_TRANSACTION = """
    SELECT count(*) FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
      AND state IN ('active', 'idle in transaction', 'idle in transaction (aborted)')
"""


@pytest.fixture(autouse=True)
def _others_done_before_flush(request):
    """After a test on committed data on PostgreSQL: what it set off in other processes (a worker's
    notification fan-out, its emails) leaves its transaction before the database is flushed, for up to
    10 s. A fan-out still in its transaction deadlocked with the flush's TRUNCATE (CI, 2026-12-05)."""
    if "transactional_db" not in request.fixturenames:
        yield
        return
    request.getfixturevalue("transactional_db")
    yield
    from django.db import connection

    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(_OTHERS_IN_A_TRANSACTION)
            if cursor.fetchone()[0] == 0:
                return
        time.sleep(0.02)


@pytest.fixture(autouse=True)
def _session_status_stays_right(request):
    """After every test that touches the database: each session's stored status (agents_app.
    session_status) is what its turns and tickets say, whatever the test did through the app."""
    names = [n for n in ("transactional_db", "db") if n in request.fixturenames]
    if not names or request.node.get_closest_marker("status_not_checked"):
        yield
        return
    request.getfixturevalue(names[0])
    yield
    from agents_app.models import AdkSession, Turn
    from agents_app.session_status import status_expression
    from approvals.models import PendingCall

    wrong = list(
        AdkSession.objects.annotate(now=status_expression(Turn, PendingCall))
        .exclude(status=status_expression(Turn, PendingCall))
        .values_list("pk", "status", "now")
    )
    assert not wrong, f"sessions whose stored status is wrong (pk, stored, actual): {wrong}"


@pytest.fixture(params=["asgi", "direct"])
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Live sockets both ways: frames through ASGI, and as under daphne (written at once, the channel
    layer's messages taken without a task per message). See tests/frames.py."""
    from tests.frames import use

    return use(request.param, monkeypatch)
