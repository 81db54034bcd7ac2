"""A session's "delete": ADK's delete_session archives it (DjangoSessionService; pages and the admin
through agents_app.services). On PostgreSQL a session that owes nothing (no queued or running turn, no
open ticket) is archived by one statement (agents_app.session_sql.archive_quiet_statement), from the
event loop when the async store is called from async code (agents_app.session_async); otherwise, or
when that statement changes nothing, the checked way (`session_archive`: its row locked)."""

from __future__ import annotations

from typing import Any

from asgiref.sync import sync_to_async
from django.db import connection, transaction
from django.utils import timezone

from adkweb.errors import Conflict, NotFound

from . import fanout, session_async, session_sql
from .events import anotify_session_status, apublish_in_order, notify_session_status
from .models import AdkSession, Turn
from .session_status import session_status_sync


class SessionBusy(Conflict):
    """The agent is working in the session (HTTP 409)."""


@transaction.atomic
def session_archive(*, session: AdkSession, actor: Any = None, what: str = "delete it") -> AdkSession:
    """ "Delete" a session: archive it. ADK's API answers 404 for it from now on and the pages and
    lists no longer show it, but nothing is erased: its events, turns, tickets and responses stay
    for the audit trail. Its open tickets are cancelled (nobody will answer them); refused (409)
    while the agent works in it."""
    from approvals.services import tickets_cancel_archived

    row = AdkSession.objects.select_for_update().filter(pk=session.pk).first()
    if row is None:
        raise NotFound(f"Session not found: {session.session_id}")
    if Turn.objects.filter(session=row, status__in=(Turn.Status.QUEUED, Turn.Status.RUNNING)).exists():
        raise SessionBusy(f"The agent is working in this session; {what} once its turn has finished.")
    by = _username(actor)
    tickets_cancel_archived(session=row, by=by)
    session_status_sync(row.pk)  # before it leaves every read: its stored status is idle
    row.archived_at, row.archived_by = timezone.now(), by
    row.save(update_fields=["archived_at", "archived_by"])
    session_pk = row.pk
    transaction.on_commit(lambda: _notify_archived(session_pk), robust=True)
    return row


def session_delete(*, app_name: str, user_id: str, session_id: str, actor: Any = None) -> None:
    """ADK's delete_session from sync code (DjangoSessionService.delete_session_sync)."""
    if connection.vendor == "postgresql":
        by = _username(actor)
        archived = session_sql.archive_quiet(
            app_name=app_name, user_id=user_id, session_id=session_id, at=timezone.now(), by=by
        )
        if archived is not None:  # nothing owed in it: archived in one statement
            transaction.on_commit(lambda: _notify_archived(archived), robust=True)
            return
    _archive_checked(app_name=app_name, user_id=user_id, session_id=session_id, actor=actor)


async def asession_delete(*, app_name: str, user_id: str, session_id: str) -> None:
    """ADK's delete_session from async code where the loop's connection may serve it
    (session_async.usable()): the one statement sent from the loop, committed, then the status
    published from the loop (`session.status` and the pages' chip: what `_notify_archived` sends
    from a thread), not waited for, in order with what the loop publishes next. Nothing archived
    (not there, something owed, no loop connection free): the checked way, on a thread."""
    try:
        archived = await session_async.archive_quiet(
            app_name=app_name, user_id=user_id, session_id=session_id, at=timezone.now(), by=""
        )
    except session_async.Busy:
        archived = None
    if archived is None:
        await sync_to_async(_archive_checked)(app_name=app_name, user_id=user_id, session_id=session_id)
        return
    session_pk, status = archived
    await apublish_in_order(anotify_session_status, session_pk=session_pk, status=status)
    await apublish_in_order(fanout.anotify_deleted, session_pk=session_pk)


def _archive_checked(*, app_name: str, user_id: str, session_id: str, actor: Any = None) -> None:
    row = AdkSession.objects.filter(app_name=app_name, user_id=user_id, session_id=session_id).first()
    if row is not None:
        session_archive(session=row, actor=actor)


def _username(actor: Any) -> str:
    return actor.get_username() if actor is not None and getattr(actor, "is_authenticated", False) else ""


def _notify_archived(session_pk: int) -> None:
    notify_session_status(session_pk=session_pk)
    fanout.notify_deleted(session_pk)  # its open pages close now
