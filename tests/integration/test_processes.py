"""The crash and outage tests' helpers leave the test run as they found it (tests/integration/processes.py)."""

from __future__ import annotations

from celery import current_app

from . import processes


def test_a_producer_for_a_tests_own_redis_does_not_become_the_current_app():
    """Shared tasks' `.delay()` sends with the current app: a producer left current sent later tests'
    tasks (the engine scenarios' sweeper) to an earlier test's Redis, stopped by then."""
    before = current_app._get_current_object()
    app = processes.producer("redis://127.0.0.1:1/0")
    assert current_app._get_current_object() is before is not app
