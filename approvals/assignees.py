"""An assignee who loses the right to decide their ticket gives it back: a change of their rights (out of
the ticket's groups or the approvers, a permission taken from them or from a group of theirs, a group
deleted, their account deactivated or their username changed: adkweb.live_roles and adkweb.live_logins
hear of each) unassigns, in the transaction that makes the change, each open ticket assigned to them
that they may no longer decide (approvals.permissions.decide_refusal), with a 'given back' entry in its
history naming them and why; the ticket is then nobody's in "mine" and the next approver takes it.

Race-safe against a take (services.ticket_assign) without locking tickets the change does not concern:
both lock the person's row first (FOR NO KEY UPDATE; a deactivation's UPDATE holds it anyway). A take
that locked it first commits before the change reads whose tickets to give back; a change that locked
it first commits before the take checks the person's rights, and the take is refused."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction

from . import events
from .models import PendingCall, TicketActivity
from .permissions import decide_refusal


def person_locked(person: Any) -> Any:
    """This person's row, locked until the transaction ends (a change of their rights waits for it), as
    stored now (their rights read afresh); None if it is gone."""
    User = get_user_model()
    return User.objects.select_for_update(no_key=True).filter(pk=person.pk).first()


def assignees_recheck(person_pks: list[Any]) -> int:
    """Give back the open tickets assigned to these people that they may no longer decide; how many."""
    User = get_user_model()
    given = 0
    with transaction.atomic():
        people = {p.pk: p for p in User.objects.select_for_update(no_key=True).filter(pk__in=person_pks).order_by("pk")}
        tickets = PendingCall.objects.select_for_update(of=("self",)).filter(
            assigned_to__in=list(people), status__in=PendingCall.OPEN_STATUSES
        )
        for ticket in tickets.order_by("pk"):
            person = people.get(ticket.assigned_to_id) if ticket.assigned_to_id is not None else None
            refusal = decide_refusal(person, ticket) if person is not None else None
            if person is None or refusal is None:
                continue
            why = "their account was deactivated." if not person.is_active else refusal
            ticket.assigned_to = None
            ticket.save(update_fields=["assigned_to", "updated_at"])
            TicketActivity.objects.create(
                ticket=ticket,
                kind=TicketActivity.Kind.GIVEN_BACK,
                message=f"Given back: {person.get_username()} may no longer decide it ({why})",
                detail={"assignee": person.pk, "username": person.get_username(), "why": why},
            )
            events.after_commit_ticket_changed(ticket)
            given += 1
    return given


def connect() -> None:
    from adkweb.live_logins import on_rights_change

    on_rights_change(assignees_recheck)
