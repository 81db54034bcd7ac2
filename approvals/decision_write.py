"""A checked decision written (approvals.decisions): its `Response` row, its ticket's new state, its
notice, an approver's edit of the arguments, and a standing grant it gives."""

from __future__ import annotations

from typing import Any, cast

from django.db import transaction
from django.db.models import Field
from django.utils import timezone

from adkweb.notify import TICKET_DECIDED, notify
from agents_app.models import Turn
from agents_app.services import TurnRiding

from . import edits, events, grants
from .decision_plan import Plan
from .models import PendingCall, Response, StandingGrant, TicketActivity
from .record import response_append, response_append_with


def apply_edit(ticket: PendingCall, edited: dict[str, Any], actor: Any) -> None:
    """An approver's edit of the arguments, on the ticket (saved with the decision) and in its activity."""
    before = ticket.current_args
    ticket.edited_args, ticket.edited_by, ticket.edited_at = edited, actor, timezone.now()
    ticket.edited_by_username = actor.get_username() if actor is not None else ""  # kept if the account goes
    TicketActivity.objects.create(
        ticket=ticket,
        kind=TicketActivity.Kind.EDITED,
        actor=actor,
        message="Arguments edited: " + edits.changes_text(before, edited),
        detail={"before": before, "after": edited},
    )


_DECIDED_FIELDS = ["status", "closed_at", "closed_by", "closed_by_username", "updated_at"]
_EDITED_FIELDS = ["edited_args", "edited_by", "edited_by_username", "edited_at"]  # apply_edit's


def record(
    plan: Plan,
    turn: Turn | None,
    actor: Any,
    source: str,
    grant: StandingGrant | None,
    riding: TurnRiding | None = None,
) -> Response:
    """The decision's row, its ticket's write and its notice; `riding`: its turn's writes too (PostgreSQL),
    in the record's statement, the row's turn the one written there."""
    answer, ticket = plan.answer, plan.answer.ticket
    person = actor if actor is not None and actor.is_authenticated else None
    final = answer.final and not plan.held
    row = {
        "pending_call": ticket,
        "action": answer.action,
        "payload": answer.payload,
        "final": final,
        "comment": answer.comment,
        "actor": person,
        "turn": None if plan.held else turn,
        "source": source,
        "grant": grant,
        "args_hash": plan.hash,
        "edited_args": answer.edited_args,
        "counted": plan.counted if final else None,  # closing a quorum ticket: who closed it with whom
    }
    if final:
        ticket.status, ticket.closed_at, ticket.closed_by = plan.outcome, timezone.now(), person
        ticket.closed_by_username = person.get_username() if person else ""  # kept if the account goes
    elif not plan.held:
        ticket.status = PendingCall.Status.IN_PROGRESS
    notice = None
    if final and source != Response.Source.EXPIRY:  # an expiry is told as ticket.expired
        by = person.get_username() if person else None
        notice = (TICKET_DECIDED, ticket, {"status": ticket.status, "by": by, "comment": answer.comment})
    # What a decision changes (the row is locked: the other columns are as read); not every column
    fields = _DECIDED_FIELDS + (_EDITED_FIELDS if answer.edited_args is not None else [])
    if plan.held and person is not None and ticket.assigned_to_id == person.pk:
        # Their approval counts and the ticket waits for another approver's: not for them any more.
        ticket.assigned_to = None
        fields = [*fields, "assigned_to"]
    if riding is not None:  # the turn, the row, the ticket, the notice and the chain's head in one round trip
        response = response_append_with(_ticket_update(ticket, fields), notice=notice, riding=riding, **row)
    elif turn is not None and transaction.get_connection().vendor == "postgresql":
        # the row, the ticket, the notice and the chain's head in one round trip; then its link
        response = response_append_with(_ticket_update(ticket, fields), notice=notice, **row)
    else:
        response = response_append(link=False, **row)  # answers_submit chains its rows last
        if turn is not None:
            _ticket_write(ticket, fields)
        else:
            ticket.save(update_fields=fields)
        if notice is not None:
            notify(notice[0], ticket=ticket, data=notice[2])
    if answer.grant is not None and final:
        grants.grant_give(ticket=ticket, actor=actor, spec=answer.grant)
    events.after_commit_ticket_changed(ticket)
    return response


def _ticket_update(ticket: PendingCall, fields: list[str]) -> tuple[str, list[Any]]:
    """`_ticket_write`'s UPDATE as SQL and parameters (the fields' own database values), to go in the
    decision row's INSERT statement (approvals.record.response_append_with)."""
    ticket.updated_at = timezone.now()  # auto_now, as save() would
    db = transaction.get_connection()
    columns = [cast(Field, PendingCall._meta.get_field(name)) for name in fields]
    sets = ", ".join(f"{db.ops.quote_name(f.column)} = %s" for f in columns)
    params = [f.get_db_prep_save(getattr(ticket, f.attname), db) for f in columns]
    ticket._loaded_status = ticket.status  # as the save's sync leaves it
    return f"UPDATE {PendingCall._meta.db_table} SET {sets} WHERE id = %s", [*params, ticket.pk]


def _ticket_write(ticket: PendingCall, fields: list[str]) -> None:
    """`ticket.save(update_fields=fields)` without the save's status sync (agents_app.session_status),
    when this transaction queued a turn of the ticket's session: that turn keeps the session's stored
    status `running` whatever the ticket's status, and whoever finishes it recomputes the status under
    the session row's lock after this commit. One UPDATE instead of two: `_ticket_update`'s, in plain SQL
    (the ORM's `update` compiled it per decision)."""
    sql, params = _ticket_update(ticket, fields)
    with transaction.get_connection().cursor() as cursor:
        cursor.execute(sql, params)
