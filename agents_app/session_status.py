"""A conversation's status, stored on its session row (`AdkSession.status`, indexed) so that lists
filter and sort on it without recomputing it per row:

    running  a turn is queued or running
    waiting  otherwise, a ticket is open (a person owes an answer)
    failed   otherwise, its last turn failed
    idle     otherwise

It is kept right where it can change: whenever a turn or a ticket of the session is created,
deleted, or changes status in a way that matters (a turn into or out of queued/running, a ticket
opening or closing: decided, expired, cancelled), `session_status_sync` recomputes it in the same
transaction. It is wired to the models' saves (`connect`, from AgentsAppConfig.ready), so every
service that writes turns or tickets through the ORM (runner, decisions, expiry, retries, the
session store's ticket hook) keeps it, and none can forget to. Bulk `update()`s bypass saves: the
only one on turns (a requeue, running -> queued) changes nothing here.

Concurrency: the sync first locks the session row (FOR NO KEY UPDATE: inserts of turns, events and
tickets that reference it are not blocked), then computes the status in a new statement, which
sees every transaction committed before the lock was granted. So the last transaction to touch a
session's turns or tickets also writes its status last, from everything committed. Where the
transaction already holds the row's lock (the session store's append, around its event hooks:
`row_lock_held`), the saves' sync is one statement, no savepoint: compute and write if it changed;
every statement after the lock was granted sees what committed before.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import transaction
from django.db.models import Case, CharField, Exists, OuterRef, Subquery, Value, When
from django.db.models.lookups import Exact

ACTIVE_TURN_STATUSES = ("queued", "running")
OPEN_TICKET_STATUSES = ("pending", "in_progress")
STATUSES = ("running", "waiting", "failed", "idle")


def status_expression(turn_model: Any, ticket_model: Any) -> Case:
    """The status of a session row (OuterRef "pk"), from its turns and tickets. Models are passed in
    so that the data migration can use its historical ones."""
    turns = turn_model.objects.filter(session=OuterRef("pk"))
    last_turn = turns.order_by("-created_at", "-id").values("status")[:1]
    open_tickets = ticket_model.objects.filter(session=OuterRef("pk"), status__in=OPEN_TICKET_STATUSES)
    return Case(
        When(Exists(turns.filter(status__in=ACTIVE_TURN_STATUSES)), then=Value("running")),
        When(Exists(open_tickets), then=Value("waiting")),
        When(Exact(Subquery(last_turn), "failed"), then=Value("failed")),
        default=Value("idle"),
        output_field=CharField(),
    )


def _models() -> tuple[Any, Any, Any]:
    from approvals.models import PendingCall

    from .models import AdkSession, Turn

    return AdkSession, Turn, PendingCall


def session_status_sync(session_pk: int) -> str | None:
    """Recompute one session's stored status (in the caller's transaction, or its own); returns it,
    or None if the session is gone. Three statements: lock, compute, and write only if it changed.
    The compute is status_expression in SQL (`_sql`): the ORM took longer to compile it than the
    database took to run it. SQLite has no row locks (a write transaction holds the whole file
    from its BEGIN: settings' IMMEDIATE mode), so there the compute, which finds no row for a
    deleted session, is the first statement."""
    AdkSession, _, _ = _models()
    with transaction.atomic():
        db = transaction.get_connection()
        if db.vendor == "postgresql" and not list(
            AdkSession.objects.select_for_update(no_key=True).filter(pk=session_pk).values_list("pk")
        ):
            return None  # deleted (e.g. its turns are being deleted with it)
        with db.cursor() as cursor:
            cursor.execute(_sql("read"), [session_pk] * 4)
            row = cursor.fetchone()
            if row is None:
                return None
            stored, now = row
            if stored != now:
                cursor.execute(_sql("write"), [now, session_pk])
        return now


@contextmanager
def row_lock_held(session_pk: int) -> Iterator[None]:
    """Inside: this connection's transaction holds the session row's lock (the caller took it in the
    atomic block it is in, e.g. the session store's append): the saves' status sync skips taking it."""
    db = transaction.get_connection()  # this thread's connection (not the proxy all threads share)
    held: set[int] = db.__dict__.setdefault("_adkweb_session_rows_locked", set())
    added = session_pk not in held
    held.add(session_pk)
    try:
        yield
    finally:
        if added:
            held.discard(session_pk)


def _sync(session_pk: int) -> None:
    """The saves' sync: session_status_sync, or one statement when the row's lock is already held."""
    db = transaction.get_connection()
    held = db.__dict__.get("_adkweb_session_rows_locked")
    if not held or session_pk not in held or not db.in_atomic_block:
        session_status_sync(session_pk)
        return
    with db.cursor() as cursor:  # status_expression in SQL: the ORM took longer to compile it than to run it
        if db.vendor == "postgresql":
            cursor.execute(_sql("held_postgresql"), [session_pk] * 4)
        else:
            cursor.execute(_sql("held"), [session_pk] * 7)


_SQL: dict[str, str] = {}


def _sql(name: str) -> str:
    """The status statements in SQL, built once per process (status_expression, written out):
    "read" (stored status, status now; the pk 4 times), "write" (the status, the pk), and the
    held-lock sync, one UPDATE that writes the status only if it changed: "held_postgresql" (the
    pk 4 times) and "held" for SQLite (the CASE twice, as the ORM's `exclude(status=now)
    .update(status=now)` writes it: the pk 7 times)."""
    if not _SQL:
        AdkSession, Turn, PendingCall = _models()
        turns, tickets, sessions = Turn._meta.db_table, PendingCall._meta.db_table, AdkSession._meta.db_table
        active = ", ".join(f"'{s}'" for s in ACTIVE_TURN_STATUSES)
        open_ = ", ".join(f"'{s}'" for s in OPEN_TICKET_STATUSES)
        now = (
            f"CASE WHEN EXISTS (SELECT 1 FROM {turns} WHERE session_id = %s AND status IN ({active})) THEN 'running' "
            f"WHEN EXISTS (SELECT 1 FROM {tickets} WHERE session_id = %s AND status IN ({open_})) THEN 'waiting' "
            f"WHEN (SELECT status FROM {turns} WHERE session_id = %s ORDER BY created_at DESC, id DESC LIMIT 1) "
            "= 'failed' THEN 'failed' ELSE 'idle' END"
        )
        _SQL["read"] = f"SELECT status, {now} FROM {sessions} WHERE id = %s"
        _SQL["write"] = f"UPDATE {sessions} SET status = %s WHERE id = %s"
        _SQL["held"] = f"UPDATE {sessions} SET status = {now} WHERE id = %s AND status <> {now}"
        _SQL["held_postgresql"] = (
            f"UPDATE {sessions} s SET status = n.now FROM (SELECT {now} AS now) n WHERE s.id = %s AND s.status <> n.now"
        )
    return _SQL[name]


def sessions_status_refresh(session_model: Any, turn_model: Any, ticket_model: Any) -> int:
    """Recompute every session's stored status (the data migration; bulk loads such as the bench's
    seed); returns how many rows changed. The three tables are analyzed first where they have no statistics
    (adkweb.postgresql.statistics): without them the UPDATE walked every turn for each session."""
    from adkweb.postgresql.statistics import analyze_missing

    analyze_missing([m._meta.db_table for m in (session_model, turn_model, ticket_model)])
    expr = status_expression(turn_model, ticket_model)
    return session_model.objects.exclude(status=expr).update(status=expr)


# -- wired to the models' saves and deletes ---------------------------------------------------
def _active(status: str | None) -> bool:
    return status in ACTIVE_TURN_STATUSES


def _open(status: str | None) -> bool:
    return status in OPEN_TICKET_STATUSES


def _turn_saved(sender: Any, instance: Any, created: bool, update_fields: Any = None, **kw: Any) -> None:
    if update_fields is not None and "status" not in update_fields:
        return
    before = getattr(instance, "_loaded_status", None)
    # queued <-> running (a claim, a requeue) leaves the session running: nothing to recompute.
    if not created and _active(before) and _active(instance.status):
        return
    if not created and before == instance.status:
        return
    if created and _active(instance.status):
        _now_running(instance.session_id)
    else:
        _sync(instance.session_id)
    instance._loaded_status = instance.status


def _now_running(session_pk: int) -> None:
    """A new queued (or running) turn: the session is running whatever else it has, so one UPDATE
    instead of lock, compute and write. It writes even when the status is already running: the
    write takes the row lock the recompute would take, so a recompute by another transaction (a
    turn finishing) waits for this one and then sees this turn committed."""
    AdkSession, _, _ = _models()
    AdkSession.objects.filter(pk=session_pk).update(status="running")


def _ticket_saved(sender: Any, instance: Any, created: bool, update_fields: Any = None, **kw: Any) -> None:
    if update_fields is not None and "status" not in update_fields:
        return
    before = getattr(instance, "_loaded_status", None)
    # Still open (an update sent, an assignment, an edit) or still closed: the session's status holds.
    if not created and before is not None and _open(before) == _open(instance.status):
        return
    _sync(instance.session_id)
    instance._loaded_status = instance.status


def _deleted(sender: Any, instance: Any, **kw: Any) -> None:
    _sync(instance.session_id)


def connect() -> None:
    from django.db.models.signals import post_delete, post_save

    _, Turn, PendingCall = _models()
    post_save.connect(_turn_saved, sender=Turn, dispatch_uid="session_status_turn_saved")
    post_save.connect(_ticket_saved, sender=PendingCall, dispatch_uid="session_status_ticket_saved")
    post_delete.connect(_deleted, sender=Turn, dispatch_uid="session_status_turn_deleted")
    post_delete.connect(_deleted, sender=PendingCall, dispatch_uid="session_status_ticket_deleted")
