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


def walked(thing: object) -> bool:
    """Whether a full collection walks `thing` (frozen objects are in none of the generations)."""
    return any(o is thing for o in gc.get_objects())


def test_a_worker_freezes_what_its_first_drain_left_once(demo, unfrozen):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    worker_ready.send(sender=app)  # the worker's policy: its startup freeze now
    made = ["built by a first turn, to stay"]  # a list: tracked by the collector
    assert walked(made)
    _turn(session)
    assert not walked(made)  # frozen after the first drain
    more = ["built by a later turn, to stay"]
    _turn(session)
    _turn(session)
    assert walked(more)  # once: not after the next drains


def test_a_drain_outside_a_worker_freezes_nothing(demo, unfrozen):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    made = ["built before a drain"]
    _turn(session)
    assert walked(made)
