"""A session's "delete": ADK's delete_session archives it (DjangoSessionService; pages and the admin
through agents_app.services)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from adkweb.errors import Conflict, NotFound

from .events import notify_session_status
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


def _username(actor: Any) -> str:
    return actor.get_username() if actor is not None and getattr(actor, "is_authenticated", False) else ""


def _notify_archived(session_pk: int) -> None:
    notify_session_status(session_pk=session_pk)
