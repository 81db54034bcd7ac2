"""Which way the drain does its bookkeeping on this database (agents_app.runner): its statements in
plain SQL (`_statements`: agents_app.turn_sql on PostgreSQL, agents_app.turn_sqlite on SQLite, none
elsewhere: the ORM path), whether they may go from the event loop (`_from_loop`), and their arguments
(`_lease_times`, `_done_args`). Split out of agents_app.runner, which imports them back.
"""

from __future__ import annotations

import functools
from datetime import datetime, timedelta
from types import ModuleType

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.utils import load_backend
from django.utils import timezone

from . import session_async, turn_sql, turn_sqlite
from .leases import Lease
from .models import Turn


def _vendor() -> str:
    """From the settings, without a hop to the database thread (nor a connection object made for
    the loop's thread, which the database thread's calls would then be refused). Asked three times
    a turn: the backend's module is looked up once per ENGINE (`load_backend` is an import each call)."""
    return _engine_vendor(connections.settings[DEFAULT_DB_ALIAS]["ENGINE"])


@functools.cache
def _engine_vendor(engine: str) -> str:
    return str(load_backend(engine).DatabaseWrapper.vendor)


def _statements() -> ModuleType | None:
    """The drain's bookkeeping in plain SQL for this database (`start`, `done_next`): agents_app.turn_sql
    on PostgreSQL, agents_app.turn_sqlite on SQLite; None elsewhere (the ORM path, runner._drain_orm)."""
    return {"postgresql": turn_sql, "sqlite": turn_sqlite}.get(_vendor())


def _lease_times() -> tuple[datetime, datetime]:
    """Now, and when a lease taken or kept now runs out."""
    now = timezone.now()
    return now, now + timedelta(seconds=settings.ADKWEB_SESSION_LEASE_SECONDS)


def _from_loop() -> bool:
    """May the drain's statements go from the event loop (PostgreSQL, agents_app.session_async's
    connections: no hop to the database thread and back, no checkout of its connection)?"""
    return _statements() is turn_sql and session_async.usable()


def _done_args(turn: Turn, lease: Lease) -> dict:
    """`done_next`'s arguments, on either path: the turn done, the lease kept from now."""
    now, until = _lease_times()
    return {
        "turn_id": turn.pk,
        "session_pk": lease.session_pk,
        "owner": lease.owner,
        "until": until,
        "now": now,
        "config_version": turn.config_version_id,
    }
