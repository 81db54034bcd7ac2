"""An assignee who loses the right to decide their ticket gives it back: a change of their rights (out of
the ticket's groups or the approvers, a permission taken from them or from a group of theirs, a group
deleted, their account deactivated or their username changed: adkweb.live_roles and adkweb.live_logins
hear of each; their account deleted: `assignee_deleting`) unassigns, in the transaction that makes the
change, each open ticket assigned to them that they may no longer decide (approvals.permissions.
decide_refusal), with a 'given back' entry in its history naming them (as text: the entry outlives their
account) and why; the ticket is then nobody's in "mine" and the next approver takes it.

Race-safe against a take (services.ticket_assign) without locking tickets the change does not concern:
both lock the person's row first (FOR NO KEY UPDATE; a deactivation's UPDATE holds it anyway). A take
that locked it first commits before the change reads whose tickets to give back; a change that locked
it first commits before the take checks the person's rights, and the take is refused."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.db import transaction
from django.db.models import Q

from adkweb.row_locks import for_share

from . import events
from .models import PendingCall, Response, TicketActivity
from .permissions import decide_refusal


def person_locked(person: Any) -> Any:
    """This person's row, locked until the transaction ends (a change of their rights waits for it), as
    stored now (their rights read afresh); None if it is gone."""
    User = get_user_model()
    return User.objects.select_for_update(no_key=True).filter(pk=person.pk).first()


def givers_locked(tickets: list[PendingCall], decider: Any = None) -> None:
    """Lock (FOR SHARE, to the end of the transaction) the rows of the people whose held approvals of these
    quorum tickets a decision counts (approvals.decision_plan.approvers): a change of their rights locks
    them too (`assignees_recheck`), so it commits before the decision reads their rights, or waits for the
    decision's commit; never in between, counting a removed person's approval after the removal returned.
    Before the session's and tickets' locks, as takes and changes of rights take a person's row before a
    ticket's; in pk order, as `assignees_recheck` takes them, the `decider`'s row among them (a person
    deciding: approvals.decider locks it again in the decision's next round trip, and reads their rights).
    PostgreSQL (SQLite writes one at a time); nothing for tickets that need one approval (no statement)."""
    quorum = [t.pk for t in tickets if t.required_approvals > 1]
    db = transaction.get_connection()
    if not quorum or db.vendor != "postgresql":
        return
    held = Response.objects.filter(
        pending_call_id__in=quorum, action=Response.Action.APPROVE, final=False, actor__isnull=False
    ).values("actor_id")
    people = Q(pk__in=held)
    if decider is not None and getattr(decider, "pk", None) is not None:
        people |= Q(pk=decider.pk)
    for_share(get_user_model().objects.filter(people).order_by("pk"))


def taker_locked(person: Any) -> Any:
    """`person_locked` for a take (services.ticket_assign): one deleted meanwhile (`assignee_deleting` held
    their row) is no one, and the take is refused ("log in to answer tickets."), not an assignment to a
    row that is gone."""
    return person_locked(person) or AnonymousUser()


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
            _give_back(ticket, person, "their account was deactivated." if not person.is_active else refusal)
            given += 1
    return given


def _give_back(ticket: PendingCall, person: Any, why: str) -> None:
    """Unassign the ticket, with the history entry naming the person as text (the record outlives their
    account), and update its pages once the transaction commits."""
    ticket.assigned_to = None
    ticket.save(update_fields=["assigned_to", "updated_at"])
    TicketActivity.objects.create(
        ticket=ticket,
        kind=TicketActivity.Kind.GIVEN_BACK,
        message=f"Given back: {person.get_username()} may no longer decide it ({why})",
        detail={"assignee": person.pk, "username": person.get_username(), "why": why},
    )
    events.after_commit_ticket_changed(ticket)


def assignee_deleting(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A person deleted (the admin, a script) gives back their open tickets, each with its entry: the
    assignment's SET_NULL would clear it with no trace. In the deleting transaction, before the row goes,
    their row locked first as a take locks it: a take that locked it first is seen and given back; one
    that waits on it finds the person gone, and is refused."""
    with transaction.atomic():
        if person_locked(instance) is None:
            return
        tickets = PendingCall.objects.select_for_update(of=("self",)).filter(
            assigned_to=instance.pk, status__in=PendingCall.OPEN_STATUSES
        )
        for ticket in tickets.order_by("pk"):
            _give_back(ticket, instance, "their account was deleted.")


def connect() -> None:
    from django.conf import settings
    from django.db.models.signals import pre_delete

    from adkweb.live_logins import on_rights_change

    on_rights_change(assignees_recheck)
    pre_delete.connect(assignee_deleting, sender=settings.AUTH_USER_MODEL, dispatch_uid="approvals_assignee_deleting")
