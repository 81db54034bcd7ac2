"""A turn's claim and end by the ORM, each in a transaction (agents_app.turn_exec's checked path, and
the drain's where its one statement, agents_app.turn_sql, does not apply): the oldest owed turn claimed
(an orphan of a dead worker queued again, or failed past its attempts), a turn finished or queued
again under the session's lease, and what a claimed turn still owes (`turn_plan`: run, resume, or
close it from what is stored)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from adkweb.notify import TURN_FAILED, notify

from . import events
from .leases import Lease, LeaseLost
from .models import AdkSession, StoredEvent, Turn

# Why a turn of a deleted (archived) conversation was closed, as the person reads it (`turn_claim_next`).
DELETED_BEFORE_IT_RAN = "The conversation was deleted before this turn ran."
DELETED_BEFORE_IT_FINISHED = "The conversation was deleted before this turn finished."


@dataclass(frozen=True)
class Plan:
    """What a claimed turn needs: run it, resume its invocation, or close it from what is stored."""

    action: str  # "run" | "resume" | "done" | "failed"
    error: str = ""


@transaction.atomic
def turn_claim_next(session_pk: int) -> Turn | None:
    """The oldest owed turn, marked running. A turn still marked running belongs to a worker that
    died or lost its lease (we hold the lease now): it is claimed again, to be resumed. None once
    the session was deleted: its owed turns are closed failed (`_turns_close_deleted`)."""
    if _deleted(session_pk):
        _turns_close_deleted(session_pk)
        return None
    max_attempts = settings.ADKWEB_MAX_TURN_ATTEMPTS
    for orphan in Turn.objects.select_for_update().filter(session_id=session_pk, status=Turn.Status.RUNNING):
        if orphan.attempts >= max_attempts:
            _turn_finish(orphan, Turn.Status.FAILED, "The worker running this turn stopped; gave up after retries.")
        else:
            orphan.status = Turn.Status.QUEUED
            orphan.save(update_fields=["status"])
    owed = Turn.objects.select_for_update().filter(session_id=session_pk, status=Turn.Status.QUEUED)
    turn = owed.order_by("id").first()
    if turn is None:
        return None
    turn.status = Turn.Status.RUNNING
    turn.attempts += 1
    turn.started_at = timezone.now()
    turn.save(update_fields=["status", "attempts", "started_at"])
    transaction.on_commit(lambda: events.notify_session_status(session_pk=session_pk), robust=True)
    return turn


def _deleted(session_pk: int) -> bool:
    """Is the session archived ("deleted")? Its row locked first (as the drain's statements lock it
    before its turns: agents_app.turn_sql), held until this transaction ends."""
    rows = AdkSession.all_objects.select_for_update(no_key=True).filter(pk=session_pk)
    return any(archived is not None for archived in rows.values_list("archived_at", flat=True))


def _turns_close_deleted(session_pk: int) -> None:
    """Every owed turn of a deleted session closed failed, saying why, each once (its row locked and
    still owed), nothing of the agent run: ADK's get_session finds no archived session, and nothing
    may be stored in it. A turn queued behind it was written before the delete refused one (f7fcb7e)."""
    owed = Turn.objects.select_for_update().filter(session_id=session_pk, status__in=_OWED).order_by("id")
    for turn in owed:
        running = turn.status == Turn.Status.RUNNING
        _turn_finish(turn, Turn.Status.FAILED, DELETED_BEFORE_IT_FINISHED if running else DELETED_BEFORE_IT_RAN)


_OWED = (Turn.Status.QUEUED, Turn.Status.RUNNING)
_KEEP: Any = object()  # turn_finish: the turn's configuration version stays as stored


def _turn_finish(turn: Turn, status: str, error: str = "", config_version: Any = _KEEP) -> None:
    turn.status = status
    turn.error = error
    turn.finished_at = timezone.now()
    fields = ["status", "error", "finished_at"]
    if config_version is not _KEEP:
        turn.config_version_id = config_version
        fields.append("config_version")
    turn.save(update_fields=fields)
    session_pk, turn_id = turn.session_id, turn.pk
    if status == Turn.Status.FAILED:
        notify(TURN_FAILED, turn=turn, data={"error": error})  # webhooks; sent by Celery after commit

    def announce() -> None:
        events.notify_turn_finished(session_pk=session_pk, turn_id=turn_id, status=status)
        events.notify_session_status(session_pk=session_pk)

    transaction.on_commit(announce, robust=True)


def _hold(lease: Lease | None) -> None:
    """Inside a transaction: lock the session row and make sure the lease is still ours (archived or not:
    a run that met the delete is closed by the drain that holds it, not left running as LeaseLost)."""
    if (
        lease is not None
        and not AdkSession.all_objects.select_for_update().filter(pk=lease.session_pk, lease_owner=lease.owner).exists()
    ):
        lease.lost = True
        raise LeaseLost(f"Session {lease.session_pk}: another worker owns this run now.")


@transaction.atomic
def turn_finish(
    turn_id: int, status: str, error: str = "", lease: Lease | None = None, config_version: Any = _KEEP
) -> None:
    """Close a turn (in a transaction, the lease checked); `config_version`: the agent configuration
    version its run was built from (recorded with its end, in the same write)."""
    _hold(lease)
    _turn_finish(Turn.objects.select_for_update().get(pk=turn_id), status, error, config_version)


@transaction.atomic
def turn_requeue(turn_id: int, lease: Lease | None = None) -> None:
    _hold(lease)
    Turn.objects.filter(pk=turn_id).update(status=Turn.Status.QUEUED)


def turn_plan(turn: Turn) -> Plan:
    """Decide from the stored events whether the turn's invocation is owed more work."""
    from google.adk.events.event import Event

    if not turn.invocation_id:
        return Plan("run")  # nothing stored: running the message again repeats nothing
    last = StoredEvent.objects.filter(turn=turn).order_by("-id").values_list("author", "data").first()
    if last is None or last[0] == "user":
        return Plan("resume")
    event = Event.model_validate(last[1])
    if event.error_code and not event.content:
        # A tool (or a callback) raised: ADK stored this error event; resuming would end silently.
        return Plan("failed", f"{event.error_code}: {event.error_message or ''}".strip()[:2000])
    if event.actions.end_of_agent or event.is_final_response():
        return Plan("done")  # the reply (or the pause on a long-running call) is stored
    return Plan("resume")
