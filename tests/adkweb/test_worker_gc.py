"""A Celery worker leaves what it made to start out of the cyclic collector's walks (adkweb.celery,
adkweb.gcpolicy.freeze_startup): a full collection there walked ~190k objects (Django, the apps, ADK),
~42 ms of whatever turn it fell in."""

from __future__ import annotations

import gc

from celery.signals import worker_process_init, worker_ready

from adkweb.celery import app


def test_a_worker_freezes_its_startup_objects_when_ready_and_in_each_prefork_child():
    was = gc.get_freeze_count()
    try:
        for signal in (worker_ready, worker_process_init):
            gc.unfreeze()
            assert gc.get_freeze_count() == 0
            signal.send(sender=app)
            assert gc.get_freeze_count() > 50_000, signal.name
    finally:
        if not was:
            gc.unfreeze()
