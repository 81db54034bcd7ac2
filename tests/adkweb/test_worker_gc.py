"""A Celery worker leaves what it made to start out of the cyclic collector's walks (adkweb.celery,
adkweb.gcpolicy.freeze_startup): a full collection there walked ~190k objects (Django, the apps, ADK),
~42 ms of whatever turn it fell in."""

from __future__ import annotations

import gc

from celery.signals import worker_process_init, worker_ready

from adkweb import gcpolicy
from adkweb.celery import app


def test_a_worker_freezes_its_startup_objects_when_ready_and_in_each_prefork_child(monkeypatch):
    monkeypatch.setattr(gcpolicy, "_drain_freeze_due", False)  # armed by the signals: no drain of this process's
    was = gc.get_freeze_count()
    try:
        for signal in (worker_ready, worker_process_init):
            gc.unfreeze()
            assert gc.get_freeze_count() == 0
            signal.send(sender=app)
            assert gc.get_freeze_count() > 50_000, signal.name
            assert gcpolicy._drain_freeze_due  # and what its first drain leaves (tests/agents_app/test_drain_gc.py)
    finally:
        if not was:
            gc.unfreeze()
