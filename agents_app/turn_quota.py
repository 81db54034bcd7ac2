"""A person's cap on agent work: ADKWEB_MAX_QUEUED_TURNS_PER_USER turns queued or running at once (split
out of agents_app.services, which re-exports TooManyTurns and turn_quota_check; on PostgreSQL turn_add
checks the cap in the turn's own statements, agents_app.turn_insert)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import QuerySet

from adkweb.errors import TooManyRequests

from .models import Turn


class TooManyTurns(TooManyRequests):
    """A person has ADKWEB_MAX_QUEUED_TURNS_PER_USER turns queued or running already (HTTP 429)."""


def _active_turns(user_pk: int) -> QuerySet:
    """The person's queued and running turns."""
    return Turn.objects.filter(created_by_id=user_pk, status__in=[Turn.Status.QUEUED, Turn.Status.RUNNING])


def turn_quota_check(user: Any) -> None:
    """Refuse a new turn while the person has the cap of turns queued or running (each may cost model
    calls). Their user row is locked for the count, so concurrent requests cannot both pass the last
    slot. Call inside the transaction that creates the turn. On PostgreSQL turn_add does this in the
    turn's own statements (agents_app.turn_insert: the lock, then the count and the insert)."""
    cap = settings.ADKWEB_MAX_QUEUED_TURNS_PER_USER
    if cap <= 0:
        return
    db = transaction.get_connection()
    if db.vendor == "sqlite":
        # No lock to take: SQLite's write transaction holds the whole file from its BEGIN (IMMEDIATE,
        # adkweb.sqlite3), and SQLite has no FOR UPDATE (the ORM's lock statement was a plain read). The
        # count in plain SQL: the ORM compiled it, and the lock's read, per turn (~0.8 ms in embedded mode).
        with db.cursor() as cursor:
            cursor.execute(_ACTIVE_COUNT, [user.pk, Turn.Status.QUEUED.value, Turn.Status.RUNNING.value])
            active = cursor.fetchone()[0]
    else:
        get_user_model().objects.select_for_update(no_key=True).filter(pk=user.pk).exists()  # rows may reference it
        active = _active_turns(user.pk).count()
    if active >= cap:
        _too_many(user, cap)


_ACTIVE_COUNT = f"SELECT COUNT(*) FROM {Turn._meta.db_table} WHERE created_by_id = %s AND status IN (%s, %s)"


def _too_many(user: Any, cap: int) -> None:
    active = _active_turns(user.pk).count()
    raise TooManyTurns(
        f"You have {active} agent turns queued or running, the most one person may have at once ({cap}). "
        "Wait for one to finish, then send again."
    )
