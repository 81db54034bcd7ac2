"""A Celery worker's garbage-collector policy (adkweb.gcpolicy.freeze_worker, at its ready signal) freezes
what survives its first drain that ran a turn (the app's runner, ADK's objects), once: full collections
then no longer walk them (bench/README.md, phase 21 (drain)). A process that is no worker (the web
process's eager runs and embedded worker threads) freezes nothing after a drain."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from celery.signals import worker_ready

from adkweb import gcpolicy
from adkweb.celery import app
from agents_app import services

from .test_worker_loop import _turn, drained  # noqa: F401 - the fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("drained")]


@pytest.fixture
def unfrozen(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    was = gc.get_freeze_count()
    monkeypatch.setattr(gcpolicy, "_drain_freeze_due", False)
    yield
    if not was:
        gc.unfreeze()


def test_a_worker_freezes_what_its_first_drain_left_once(demo, unfrozen):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    worker_ready.send(sender=app)  # the worker's policy: its startup freeze now
    at_start = gc.get_freeze_count()
    made = [{"n": n} for n in range(1000)]  # what a first turn builds to stay (tracked by the collector)
    _turn(session)
    after_first = gc.get_freeze_count()
    assert after_first >= at_start + len(made)
    more = [{"n": n} for n in range(1000)]
    _turn(session)
    _turn(session)
    assert gc.get_freeze_count() <= after_first  # once (what was frozen may be freed since, not `more`)
    assert made and more


def test_a_drain_outside_a_worker_freezes_nothing(demo, unfrozen):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    before = gc.get_freeze_count()
    _turn(session)
    assert gc.get_freeze_count() <= before
