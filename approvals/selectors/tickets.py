"""Reads on the human side: one ticket (its page's parts), who may decide it and why not, and the
standing grants."""

from __future__ import annotations

from typing import Any, NamedTuple

from django.db import connection
from django.db.models import Q, QuerySet

from adkweb.compiled import rows as compiled_rows
from adkweb.compiled_objects import objects
from adkweb.roles import APPROVERS, DECIDE_TICKETS, is_policy_admin

from ..models import PendingCall, Response, StandingGrant, TicketActivity
from ..permissions import can_view_ticket, decide_refusal, decides_q, escalated, visible_q

_TICKET_RELATED = ("session", "closed_by", "assigned_to", "edited_by", "policy")


def ticket_get(*, ticket_id: int) -> PendingCall | None:
    """The ticket with the rows its page shows, by a query compiled once (five joins: ~1.8 ms to compile)."""
    build = lambda pk: PendingCall.objects.select_related(*_TICKET_RELATED).filter(pk=pk).order_by()  # noqa: E731
    found = objects("ticket_get", (), build, ticket_id)
    return found[0] if found else None


def ticket_timeline(*, ticket: PendingCall) -> Any:
    """The part of the conversation a ticket page shows: the events of the ADK invocation that
    opened the ticket and of the turns that carried its responses (its latest
    agents_app.selectors.TIMELINE_LATEST; the conversation page has the whole). Two queries more
    than the events themselves, whatever the conversation's length."""
    from agents_app import selectors as conversations

    turns = Response.objects.filter(pending_call=ticket, turn__isnull=False).values_list(
        "turn__invocation_id", flat=True
    )
    ids = {i for i in [ticket.invocation_id, *turns] if i}
    return conversations.session_timeline(ticket.session, invocation_ids=ids if ids else None)


def _responses(pk: int) -> QuerySet[Response]:
    rows = Response.objects.filter(pending_call_id=pk).select_related("actor", "grant__created_by")
    return rows.order_by("created_at", "id")


def ticket_responses(*, ticket: PendingCall) -> list[Response]:
    """The ticket's responses, oldest first; an open quorum ticket's say whether their giver may still
    decide it (`DECIDES`, read by `approval_tally`), in the same query."""
    if ticket.is_open and ticket.required_approvals > 1:
        return objects("ticket_responses", ("decides",), lambda pk: deciding(_responses(pk)), ticket.pk)
    return objects("ticket_responses", (), _responses, ticket.pk)


def _activities(pk: int) -> QuerySet[TicketActivity]:
    return TicketActivity.objects.filter(ticket_id=pk).select_related("actor").order_by("created_at", "id")


def ticket_activities(*, ticket: PendingCall) -> list[TicketActivity]:
    return objects("ticket_activities", (), _activities, ticket.pk)


DECIDES = "giver_decides"  # on a response read by `deciding`: its giver may still decide its ticket


def deciding(rows: QuerySet[Response]) -> QuerySet[Response]:
    """Responses, each with `DECIDES`: whether its giver may decide its ticket now (approvals.permissions.
    decides_q), every giver asked in the query that reads the rows."""
    return rows.annotate(**{DECIDES: decides_q()})


def ticket_approvals(*, ticket: PendingCall, responses: list[Response] | None = None) -> list[Response]:
    """The approvals that count toward the ticket's quorum (`approval_tally`'s first list)."""
    return approval_record(ticket=ticket, responses=responses).counted


def approval_tally(
    *, ticket: PendingCall, responses: list[Response] | None = None
) -> tuple[list[Response], list[Response]]:
    """`approval_record`'s approvals that count and those that do not."""
    record = approval_record(ticket=ticket, responses=responses)
    return record.counted, record.lapsed


class Tally(NamedTuple):
    counted: list[Response]
    lapsed: list[Response]
    recorded: bool | None  # closed: whether its close recorded which approvals counted; None while open


TALLY_ROWS = "tally_rows"  # a ticket's approvals and closing decision, prefetched by approvals_attach


def approval_record(*, ticket: PendingCall, responses: list[Response] | None = None) -> Tally:
    """The approvals of the arguments as they are now (an edit starts the count again), one per person,
    oldest first: those that count toward the ticket's quorum and those that do not. Open: an approval
    counts while its giver may decide the ticket (left its groups, lost the approvers' permission,
    deactivated or deleted: it no longer does; the check a new answer meets). Closed: those its closing
    decision recorded as counting then (Response.counted, with itself when it is an approval), whoever
    may decide now; closed with no record (before it was kept; cancelled), every approval, none apart
    (who could decide then is not known), `recorded` False. They all stay in its history. `responses`:
    the ticket's `ticket_responses`, already read (the approvals are among them: no second query)."""
    rows: Any = getattr(ticket, TALLY_ROWS, None)
    if responses is not None:
        rows = responses
    if rows is None:
        found = Response.objects.filter(Q(action=Response.Action.APPROVE) | Q(final=True), pending_call=ticket)
        found = found.select_related("actor").order_by("created_at", "id")
        rows = deciding(found) if ticket.is_open else found  # a closed ticket's record is on its closing row
    rows = list(rows)
    current = ticket.args_hash
    approvals = [r for r in rows if r.action == Response.Action.APPROVE and r.args_hash == current]
    if ticket.is_open:
        return _open_tally(_one_each(approvals))
    closing = next((r for r in rows if r.final), None)
    if closing is None or closing.counted is None:
        return Tally(_one_each(approvals), [], False)
    ids = {*closing.counted, *([closing.pk] if closing.action == Response.Action.APPROVE else [])}
    counted = _one_each([r for r in approvals if r.pk in ids])
    people = {_giver(r) for r in counted}
    lapsed = _one_each([r for r in approvals if r.pk not in ids and _giver(r) not in people])
    return Tally(counted, lapsed, True)


def _giver(response: Response) -> Any:
    return response.actor_id if response.actor_id is not None else ("row", response.pk)


def _one_each(rows: list[Response]) -> list[Response]:
    """The first of each giver's responses, in order."""
    seen: set[Any] = set()
    out = []
    for r in rows:
        if _giver(r) not in seen:
            seen.add(_giver(r))
            out.append(r)
    return out


def _open_tally(out: list[Response]) -> Tally:
    if not out:
        return Tally(out, [], None)
    if all(hasattr(r, DECIDES) for r in out):
        decides = {r.pk for r in out if getattr(r, DECIDES)}
    else:  # rows read without it: ask for them all at once
        found = Response.objects.filter(decides_q(), pk__in=[r.pk for r in out])
        decides = set(found.values_list("pk", flat=True))
    return Tally([r for r in out if r.pk in decides], [r for r in out if r.pk not in decides], None)


def ticket_visible_get(*, user: Any, ticket_id: int) -> PendingCall | None:
    """One ticket if it exists and the user may see it, else None (the API answers 404 either way)."""
    ticket = ticket_get(ticket_id=ticket_id)
    return ticket if ticket is not None and can_view_ticket(user, ticket) else None


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
