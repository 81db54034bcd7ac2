"""Reads on the human side: who decides a ticket (its groups; whether a person may; whose approval
already counts), whom to tell, and the standing grants."""

from __future__ import annotations

from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Q, QuerySet

from adkweb.compiled import rows as compiled_rows
from adkweb.roles import APPROVERS, DECIDE_TICKETS, is_policy_admin

from ..models import PendingCall, Response, StandingGrant
from ..permissions import decide_refusal, escalated, visible_q
from .tickets import ticket_approvals, ticket_get

# -- who decides a ticket (notifications ask whom to tell) -----------------------------------------
LOADED = "_loaded"  # a ticket's groups prefetched as a list (the API's ticket list) are at `<relation>_loaded`


def loaded_groups(ticket: PendingCall, relation: str) -> list[Any]:
    """The ticket's `approver_groups` or `escalation_groups`: the list a page's prefetch left on it
    (approvals.selectors.inbox.inbox_page: a list per ticket, not a manager's queryset built for each
    of 50 tickets and two relations), else read now."""
    found = getattr(ticket, relation + LOADED, None)
    return found if found is not None else list(getattr(ticket, relation).all())


def ticket_approver_groups(*, ticket: PendingCall) -> list[str]:
    """The groups a ticket is routed to now: its approver groups (and escalation groups once it
    escalated), or the approvers role for a ticket no policy routes."""
    names = [g.name for g in loaded_groups(ticket, "approver_groups")] if ticket.routed else [APPROVERS]
    if escalated(ticket):
        names += [g.name for g in loaded_groups(ticket, "escalation_groups")]
    return sorted(set(names))


def can_decide(user: Any, ticket: PendingCall) -> bool:
    """Whether this person may decide this ticket now (approvals.permissions.decide_refusal)."""
    return decide_refusal(user, ticket) is None


class Counted(NamedTuple):
    """A quorum ticket's approvals that count now, of those it needs: one person's among them."""

    counted: int
    required: int

    @property
    def more(self) -> int:
        return self.required - self.counted


def own_approval_counts(user: Any, ticket: PendingCall, counted: list[Response] | None = None) -> Counted | None:
    """The one rule its readers share: how far the ticket's quorum is, if this person's approval already
    counts toward it (no one counts twice: no second approval, no approve link, and the ticket is not theirs
    to take: another approver moves it), else None. A ticket that needs one approval has none held: None,
    without a query. `counted`: its `ticket_approvals`, already read. Read by `approval_refusal`, the ticket
    page, services.take_refusal (assign) and notifications.links (the approve link)."""
    if ticket.required_approvals <= 1:
        return None
    counted = ticket_approvals(ticket=ticket) if counted is None else counted
    if not any(r.actor_id == getattr(user, "pk", None) for r in counted):
        return None
    return Counted(len(counted), ticket.required_approvals)


def approval_refusal(user: Any, ticket: PendingCall, action: str = "approve") -> str | None:
    """Why this person may not approve (or reject) this ticket now, or None: the ticket page's rules
    (its routing: policy approver groups, the escalation groups once escalated; four-eyes) and, for
    a ticket that needs several approvals, an approval of theirs that already counts (no one counts
    twice; they may still reject it: `own_approval_counts`)."""
    refusal = decide_refusal(user, ticket)
    if refusal:
        return refusal
    if action == "approve" and (mine := own_approval_counts(user, ticket)) is not None:
        return (
            f"your approval already counts ({mine.counted} of {mine.required}); "
            "another approver must give the next one."
        )
    return None


def approval_progress(response: Response) -> str:
    """What an approval came to: "" when it decided the ticket, else "1 of 2 approvals recorded"
    (the ticket waits for more approvers; say "Approved" only once it closed)."""
    if response.final or response.action != Response.Action.APPROVE:
        return ""
    ticket = ticket_get(ticket_id=response.pending_call_id)
    if ticket is None or not ticket.is_open:
        return ""
    return f"{len(ticket_approvals(ticket=ticket))} of {ticket.required_approvals} approvals recorded"


def works_inbox(user: Any) -> bool:
    """Approvers and members of groups that policies or tickets route to (the inbox, triage)."""
    from ..permissions import works_inbox as works

    return works(user)


def ticket_deciders(*, ticket: PendingCall) -> list[Any]:
    """Everyone who may decide this ticket now, through its routing (its groups, or the approvers
    permission, or superuser), less the requester under four-eyes and anyone whose approval already
    counts toward its quorum: the people to tell about it."""
    from django.contrib.auth import get_user_model

    User = get_user_model()
    groups = [g.pk for g in loaded_groups(ticket, "approver_groups")] if ticket.routed else []
    if escalated(ticket):
        groups += [g.pk for g in loaded_groups(ticket, "escalation_groups")]
    counted: list[int] = []  # approvals that count only matter (and are read) with a quorum above one
    if ticket.required_approvals > 1:
        counted = sorted({r.actor_id for r in ticket_approvals(ticket=ticket) if r.actor_id is not None})
    fields = [f.attname for f in User._meta.concrete_fields]
    routed, n_groups = ticket.routed, len(groups)

    def people(*ids: int) -> QuerySet:
        found = User.objects.filter(groups__in=ids[:n_groups]) | User.objects.filter(is_superuser=True)
        if not routed:
            found |= User.objects.with_perm(DECIDE_TICKETS, backend="django.contrib.auth.backends.ModelBackend")
        found = found.filter(is_active=True).exclude(pk__in=ids[n_groups:]).distinct().order_by("pk")
        return found.values_list(*fields)

    # Built and compiled once per shape (routed or not, how many groups and counted approvals: each
    # ticket.opened fan-out asks, and the union with the permission query cost more to compile than
    # to answer), the group and approver pks its parameters.
    key = (routed, n_groups, len(counted))
    rows = compiled_rows("ticket_deciders", key, people, *groups, *counted)
    found = [User.from_db(connection.alias, fields, row) for row in rows]
    return [user for user in found if can_decide(user, ticket)]


# -- standing grants ---------------------------------------------------------------------------------
def grants_visible(*, user: Any, active: bool | None = None) -> QuerySet[StandingGrant]:
    """Grants of tickets this person may see (policy admins: every grant), newest first; `active`
    True/False keeps only grants that still approve / that ended or were revoked."""
    from django.utils import timezone

    qs = StandingGrant.objects.select_related("created_by", "revoked_by", "session", "policy", "ticket")
    if not is_policy_admin(user):
        qs = qs.filter(ticket__in=PendingCall.objects.filter(visible_q(user)).values("pk"))
    live = Q(revoked_at__isnull=True, expires_at__gt=timezone.now())
    if active is True:
        qs = qs.filter(live)
    elif active is False:
        qs = qs.exclude(live)
    return qs.order_by("-created_at", "-id")
