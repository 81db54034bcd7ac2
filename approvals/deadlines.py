"""Reminders, escalations and expiry, from the database: `deadlines_sweep` finds what is due and
records it, one ticket at a time under its row lock, so running it from several processes (Celery
beat in services mode, the embedded sweeper in `make run`), late, or again after a restart does
each thing exactly once. No timer lives in memory."""

from __future__ import annotations

import logging

from django.db import transaction
from django.utils import timezone

from adkweb.api import iso
from adkweb.log_context import log_ids
from agents_app.services import session_locked

from . import events
from .decision_plan import approvers, tool_gone
from .decisions import Answer, answers_submit
from .escalations import escalation_record
from .models import PendingCall, Response, TicketActivity
from .payloads import expire_payload, schema_problem
from .record import response_append

logger = logging.getLogger(__name__)
BATCH = 200


def _locked_open(ticket_id: int) -> PendingCall | None:
    ticket = PendingCall.objects.select_for_update(of=("self",)).filter(pk=ticket_id).first()
    return ticket if ticket is not None and ticket.is_open else None


@transaction.atomic
def ticket_remind(*, ticket_id: int) -> bool:
    """Record the reminder of an open ticket whose reminder time has come (once)."""
    ticket = _locked_open(ticket_id)
    if ticket is None or ticket.reminded_at is not None or not ticket.remind_at or ticket.remind_at > timezone.now():
        return False
    ticket.reminded_at = timezone.now()
    ticket.save(update_fields=["reminded_at", "updated_at"])
    due = timezone.localtime(ticket.due_at).strftime("%Y-%m-%d %H:%M %Z") if ticket.due_at else "soon"
    TicketActivity.objects.create(
        ticket=ticket, kind=TicketActivity.Kind.REMINDED, message=f"Reminder: this ticket expires at {due}."
    )
    events.deadline_reached(events.TICKET_REMINDED, ticket=ticket, data={"due_at": iso(ticket.due_at)})
    return True


@transaction.atomic
def ticket_escalate(*, ticket_id: int) -> bool:
    """Open an undecided ticket to its escalation groups too, and say so in its history (once: a decision
    after its escalation time may have recorded it already, approvals.escalations)."""
    ticket = _locked_open(ticket_id)
    return ticket is not None and escalation_record(ticket, tell=True)


@transaction.atomic
def ticket_expire(*, ticket_id: int) -> bool:
    """Close an undecided ticket past its due time as expired, and tell the agent so with the
    final FunctionResponse `{"status": "expired", ...}` (once; later answers get 409)."""
    session_pk = PendingCall.objects.filter(pk=ticket_id).values_list("session_id", flat=True).first()
    if session_pk is None:
        return False
    # The session before the ticket: the order every writer of both takes. Inside the block the
    # ticket's and the new turn's saves keep the session's stored status without locking it again.
    with session_locked(session_pk):
        return _expire(ticket_id)


def _expire(ticket_id: int) -> bool:
    ticket = _locked_open(ticket_id)
    if ticket is None or not ticket.past_due:
        return False
    escalation_record(ticket, tell=False)  # its escalation came before its due time: recorded first, if not yet
    reason = f"Nobody decided by {timezone.localtime(ticket.due_at).strftime('%Y-%m-%d %H:%M %Z')}."
    answer = Answer(ticket, expire_payload(ticket, reason), True, reason, Response.Action.EXPIRE)
    if schema_problem(ticket, answer.payload):
        # A question whose schema has no way to say "expired": close it here, send nothing.
        _close_unsent(ticket, answer, "the agent's question has no answer meaning expired.")
    elif tool_gone(ticket):  # no answer reaches an agent that lost the confirmed tool (ToolGone): nor this one
        _close_unsent(ticket, answer, f"agent {ticket.app_name!r} no longer has the tool {ticket.tool_name!r}.")
    else:
        answers_submit(session=ticket.session, answers=[answer], actor=None, source=Response.Source.EXPIRY)
    TicketActivity.objects.create(ticket=ticket, kind=TicketActivity.Kind.EXPIRED, message=f"Expired. {reason}")
    data = {"status": "expired", "by": None, "comment": reason, "due_at": iso(ticket.due_at)}
    events.deadline_reached(events.TICKET_EXPIRED, ticket=ticket, data=data)
    return True


def _close_unsent(ticket: PendingCall, answer: Answer, why: str) -> None:
    response_append(
        pending_call=ticket,
        action=Response.Action.EXPIRE,
        payload=answer.payload,
        final=True,
        comment=f"{answer.comment} Not sent: {why}",
        source=Response.Source.EXPIRY,
        args_hash=ticket.args_hash,
        counted=sorted(approvers(ticket, ticket.args_hash).values()) if ticket.required_approvals > 1 else None,
    )
    ticket.status, ticket.closed_at = PendingCall.Status.EXPIRED, timezone.now()
    ticket.save()


def deadlines_sweep() -> dict[str, int]:
    """Every reminder, escalation and expiry that is due now; returns how many of each."""
    now = timezone.now()
    open_ = PendingCall.objects.filter(status__in=PendingCall.OPEN_STATUSES)
    done = {"reminded": 0, "escalated": 0, "expired": 0}
    steps = (
        ("expired", open_.filter(due_at__lte=now), ticket_expire),
        ("reminded", open_.filter(remind_at__lte=now, reminded_at__isnull=True), ticket_remind),
        ("escalated", open_.filter(escalate_at__lte=now, escalated_at__isnull=True), ticket_escalate),
    )
    for name, qs, step in steps:
        for ticket_id in list(qs.order_by("pk").values_list("pk", flat=True)[:BATCH]):
            try:
                with log_ids(ticket=ticket_id):
                    done[name] += step(ticket_id=ticket_id)
            except Exception:  # one bad ticket must not stop the others
                with log_ids(ticket=ticket_id):
                    logger.warning("Deadline step %s failed for ticket %s", name, ticket_id, exc_info=True)
    return done
