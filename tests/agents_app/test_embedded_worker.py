"""agents_app.embedded: the in-process worker keeps its task threads' SQLite connections across tasks
(Celery's Django fixup would close them before and after every task; SQLite has no pool to take them
back, and each new connection costs Django's setup again)."""

from __future__ import annotations

import contextlib

import pytest
from celery.fixups.django import DjangoWorkerFixup
from django.db import connection

from adkweb.celery import app
from agents_app import embedded


def test_the_embedded_worker_keeps_its_sqlite_connections_across_tasks(monkeypatch):
    if connection.vendor != "sqlite":
        pytest.skip("embedded mode's SQLite")
    monkeypatch.setattr(embedded, "_started", False)
    monkeypatch.setattr(embedded, "_sweep_forever", lambda *a, **k: None)
    monkeypatch.setattr(embedded, "_stop_at_shutdown", lambda: None)  # no worker to stop at this process's exit
    monkeypatch.setattr(embedded, "_worker_context", None)
    monkeypatch.setattr("celery.contrib.testing.worker.start_worker", lambda *a, **k: contextlib.nullcontext())
    before = app.conf.get("CELERY_DB_REUSE_MAX")
    try:
        embedded.start_embedded_worker()
        fixup = DjangoWorkerFixup(app)  # what the worker's fixup reads when the worker starts
    finally:
        app.conf.CELERY_DB_REUSE_MAX = before
    closed: list[str] = []
    monkeypatch.setattr(fixup, "_close_database", lambda: closed.append("closed"))
    for _ in range(50):  # a task's before and after
        fixup.close_database()
        fixup.close_database()
    assert closed == []  # Celery's default (no reuse) closes them twice a task
