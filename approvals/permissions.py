"""Who may see and decide a ticket: the one place it is decided (the roles themselves are
project-wide: `adkweb.roles`). Pages, websockets, the API, the decision services and the
notifications (`approvals.selectors.ticket_deciders`) all ask here.

- A ticket routed by a policy to approver groups is seen and decided by members of those groups
  (and, from its escalation time on, of its escalation groups: `escalated`, by the clock, whether or
  not the deadline sweep has recorded the escalation yet); other tickets by approvers (`decide_tickets`).
- Superusers decide everything; staff observers see every ticket (read-only); the requester sees
  their own, and answers their own questions (request for input, user choice).
- Four-eyes: the requester never decides their own ticket, whatever else they are; nor does anyone who
  wrote to the agent in its conversation before the agent opened it (up to the turn that opened it: Django
  staff write in other people's conversations: one who asked the agent for a transfer in a requester's
  conversation asked for it).
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.db.models import Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Now
from django.db.models.lookups import IsNull
from django.utils import timezone

from adkweb.roles import DECIDE_TICKETS, can_audit, is_agent_admin, is_approver, is_observer

QUESTION_KINDS = ("input", "choice")


def _authenticated(user: Any) -> bool:
    return bool(user and user.is_authenticated)


def is_requester(user: Any, ticket: Any) -> bool:
    return _authenticated(user) and ticket.requester == user.get_username()


def escalation_time(ticket: Any) -> Any:
    """When the ticket is (or was) open to its escalation groups too: when the sweep recorded its
    escalation, else its escalation time unless it was decided before then (it never escalates), else
    None."""
    if ticket.escalated_at is not None:
        return ticket.escalated_at
    at = ticket.escalate_at
    if at is None or not (ticket.is_open or (ticket.closed_at is not None and ticket.closed_at >= at)):
        return None
    return at


def escalation_reached(recorded: bool, at: Any, now: Any) -> bool:
    """The escalation rule, the one definition its readers share: a ticket is open to its escalation groups
    once its escalation is recorded, and from its escalation time `at` (`escalation_time`: None if it was
    decided before then) on, that instant included, whether or not the deadline sweep has recorded it yet
    (the clock decides, as it does a ticket's expiry: approvals.decision_plan.PastDue; the sweep, or a
    decision before it, records it: approvals.escalations). `at` and `now` are datetimes, or timestamps (an
    inbox socket's facts, approvals.fanout); `escalated_q` is the same rule in SQL."""
    return recorded or (at is not None and at <= now)


def escalated_since(ticket: Any) -> Any:
    """When the ticket was opened to its escalation groups, if it has been by now (else None)."""
    at = escalation_time(ticket)
    return at if escalation_reached(ticket.escalated_at is not None, at, timezone.now()) else None


def escalated(ticket: Any) -> bool:
    """Whether the ticket is open to its escalation groups now (`escalated_since`). `escalated_q` is the
    same as a filter."""
    return escalated_since(ticket) is not None


def escalated_q(prefix: str = "", now: Any = None) -> Q:
    """`escalated(ticket)` as a filter on tickets (`prefix`: the path to them, "pending_call__"):
    `escalation_reached` in SQL, its inputs `escalation_time`'s (recorded; else escalate_at while the
    ticket was undecided then: open, or closed at or after it) and its boundary (escalate_at <= now).
    `now`: the database's clock when the query runs (a compiled query's SQL holds no time), unless given."""
    from .models import PendingCall

    def f(name: str) -> str:
        return prefix + name

    now = Now() if now is None else now
    still_open = Q(**{f("status__in"): PendingCall.OPEN_STATUSES}) | Q(**{f("closed_at__gte"): F(f("escalate_at"))})
    return Q(**{f("escalated_at__isnull"): False}) | Q(Q(**{f("escalate_at__lte"): now}), still_open)


def in_ticket_groups(user: Any, ticket: Any) -> bool:
    """A member of the ticket's approver groups, or of its escalation groups once it escalated."""
    if not _authenticated(user):
        return False
    through = Q(pk__in=ticket.approver_groups.all())
    if escalated(ticket):
        through |= Q(pk__in=ticket.escalation_groups.all())
    return Group.objects.filter(through, user=user).exists()


def routed_to(user: Any, ticket: Any) -> bool:
    """Whether the ticket's routing reaches this person (who sees and may decide it, four-eyes aside)."""
    if not _authenticated(user):
        return False
    if user.is_superuser:
        return True
    if not ticket.routed and is_approver(user):
        return True
    return in_ticket_groups(user, ticket)


def can_view_ticket(user: Any, ticket: Any) -> bool:
    if not _authenticated(user):
        return False
    if ticket.session.archived_at is not None:  # its conversation was deleted: the audit trail only
        return audits_everything(user) or routed_to(user, ticket)
    return is_requester(user, ticket) or is_observer(user) or routed_to(user, ticket)


def asking_turns(session: Any, opened: Any, turn: Any) -> QuerySet:
    """The turns that make their sender an asker of a ticket (four-eyes): the messages a person sent in its
    conversation (`session`) up to the turn whose run opened it (`turn`: its event's turn id), whoever's
    conversation it is: a turn of their own, not an answer to a ticket. Fixed when the ticket opens: a message
    written after that turn (while it ran, or while the ticket waits: a note, a question to the agent) asked
    for what comes after it, not for it. By turn id, not by clock: a turn's created_at is the web process's
    clock, the ticket's the worker's, and a worker behind the web would make the asker's message read as
    written after the ticket. Only a ticket with no turn to go by (an older row, its event or the event's
    turn null) falls back to its created_at (`opened`). `session`, `opened` and `turn` are values, or
    expressions naming a query's ticket (`asked`). The one rule `askers`, `decides_q` and the dry run
    (approvals.dry_run, many tickets at once) read."""
    from agents_app.models import Turn

    messages = Turn.objects.filter(kind=Turn.Kind.MESSAGE, created_by__isnull=False, session=session)
    by_clock = Q(created_at__lte=opened)  # older rows only: no turn to go by
    return messages.filter(Q(id__lte=turn) | Q(IsNull(turn, True), by_clock))


def _ticket_turn(event: Any) -> Subquery:
    """The turn of the ticket's event (`event`: its id, or an expression naming it), NULL without one."""
    from agents_app.models import StoredEvent

    return Subquery(StoredEvent.objects.filter(pk=event).values("turn_id")[:1])


def asked(ticket: str, person: str) -> Exists:
    """Whether `person` is among the askers of `ticket` (`asking_turns`), as a condition on a query's rows:
    `ticket` the path to the ticket ("" the row itself, "pending_call__"), `person` the path to the user
    ("actor", "closed_by")."""
    turn = _ticket_turn(OuterRef(OuterRef(f"{ticket}event_id")))  # the query's row, from two levels down
    turns = asking_turns(OuterRef(f"{ticket}session"), OuterRef(f"{ticket}created_at"), turn)
    return Exists(turns.filter(created_by=OuterRef(person)))


def askers(ticket: Any) -> set[int]:
    """Who asked the agent for the ticket in its conversation (`asking_turns`). Read once per ticket object
    (a page asks for several people, a fan-out for every decider)."""
    found = getattr(ticket, "_adkweb_askers", None)
    if found is None:
        turns = asking_turns(ticket.session_id, ticket.created_at, _ticket_turn(ticket.event_id))
        found = set(turns.values_list("created_by", flat=True).distinct())
        ticket._adkweb_askers = found
    return found


def decide_refusal(user: Any, ticket: Any) -> str | None:
    """Why this person may not decide (answer) this ticket, or None if they may. `decides_q` is the same
    rule in SQL (tests/approvals/test_decide_rule_twins.py holds them together)."""
    if not _authenticated(user) or not user.is_active:
        return "log in to answer tickets."
    own = is_requester(user, ticket)
    if own and ticket.four_eyes:
        return "four-eyes: you requested this, so someone else must decide it."
    if ticket.four_eyes and user.pk in askers(ticket):
        return (
            f"four-eyes: you asked the agent in this conversation before it opened this ticket (for "
            f"{ticket.requester}), so someone else must decide it."
        )
    if own and ticket.kind in QUESTION_KINDS:
        return None  # the agent asks its own user
    if routed_to(user, ticket):
        return None
    if ticket.routed:
        names = ", ".join(ticket.approver_groups.order_by("name").values_list("name", flat=True))
        return f"only members of {names or 'its approver groups'} decide this ticket."
    return "only approvers answer this kind of ticket."


def decides_q() -> Q:
    """`decide_refusal(response.actor, response.pending_call) is None` as a filter on Response rows: every
    giver of a quorum's held approvals asked at once, in the query that reads them (approvals.selectors.
    ticket_approvals, approvals.decision_plan.approvers). The same rules in the same order; held to
    decide_refusal, clause by clause, by tests/approvals/test_decide_rule_twins.py: a change to one is made
    to the other."""
    from django.contrib.auth import get_user_model

    from .models import PendingCall

    User = get_user_model()
    own = Q(**{f"actor__{User.USERNAME_FIELD}": F("pending_call__requester")})
    app_label, codename = DECIDE_TICKETS.split(".")
    perm = {"permission__codename": codename, "permission__content_type__app_label": app_label}
    approver = Exists(User.user_permissions.through.objects.filter(user=OuterRef("actor"), **perm)) | Exists(
        Group.permissions.through.objects.filter(group__user=OuterRef("actor"), **perm)
    )
    member = {"pendingcall": OuterRef("pending_call"), "group__user": OuterRef("actor")}
    routed = (
        Q(actor__is_superuser=True)
        | Q(approver, pending_call__routed=False)
        | Q(Exists(PendingCall.approver_groups.through.objects.filter(**member)))
        | Q(Exists(PendingCall.escalation_groups.through.objects.filter(**member)), escalated_q("pending_call__"))
    )
    question = Q(own, pending_call__kind__in=QUESTION_KINDS)
    by_asker = asked("pending_call__", "actor")
    four_eyes = ~Q(own, pending_call__four_eyes=True) & ~Q(by_asker, pending_call__four_eyes=True)
    return Q(actor__is_active=True) & four_eyes & (question | routed)


def can_decide_ticket(user: Any, ticket: Any) -> bool:
    """Approvers (or the ticket's groups) answer tickets; the requester answers their own questions
    (request for input, user choice); four-eyes keeps the requester off their own ticket."""
    return decide_refusal(user, ticket) is None


def works_inbox(user: Any) -> bool:
    """Approvers, and members of any group a policy or a ticket routes to, work the inbox."""
    from .models import PendingCall, Policy

    if not _authenticated(user):
        return False
    if is_approver(user):
        return True
    cached = getattr(user, "_adkweb_works_inbox", None)  # asked by several context processors a page
    if cached is not None:
        return bool(cached)
    groups = Group.objects.filter(user=user)
    routed = Policy.objects.filter(Q(approver_groups__in=groups) | Q(escalation_groups__in=groups))
    on_tickets = PendingCall.approver_groups.through.objects.filter(group__in=groups)
    works = routed.exists() or on_tickets.exists()
    user._adkweb_works_inbox = works
    return works


def visible_q(user: Any) -> Q:
    """The tickets this person may see, as a filter (the inbox, the API list, counts)."""
    from agents_app.models import AdkSession

    if not _authenticated(user):
        return Q(pk__in=[])
    # A deleted conversation's tickets: the audit page only. Written as "not one of the archived
    # sessions" (few: PostgreSQL hashes them once, from the archived_at index) rather than a join to
    # every ticket's session: a list that walks its index (a deep page's key, a count) then reads no
    # session row per ticket. The same tickets: every ticket has its session.
    live = ~Q(session_id__in=AdkSession.all_objects.filter(archived_at__isnull=False).values("pk"))
    return live & ticket_scope_q(user)


def ticket_scope_q(user: Any) -> Q:
    """The tickets this person may see, deleted conversations' included (the audit trail): routing
    by policy holds there too, so an approver outside a ticket's groups never reads its decisions."""
    from .models import PendingCall

    if not _authenticated(user):
        return Q(pk__in=[])
    if user.is_superuser or is_observer(user):
        return Q()
    groups = Group.objects.filter(user=user).values("pk")
    approver_of = PendingCall.approver_groups.through.objects.filter(pendingcall=OuterRef("pk"), group__in=groups)
    escalated_to = PendingCall.escalation_groups.through.objects.filter(pendingcall=OuterRef("pk"), group__in=groups)
    q = Q(requester=user.get_username()) | Q(Exists(approver_of)) | (escalated_q() & Q(Exists(escalated_to)))
    if is_approver(user):
        q |= Q(routed=False)
    return q


def audits_everything(user: Any) -> bool:
    """Superusers, staff observers and agent admins read every decision, archived tickets' too."""
    return _authenticated(user) and (user.is_superuser or is_observer(user) or is_agent_admin(user))


def may_audit(user: Any) -> bool:
    """The audit page and its exports: the auditing roles, and whoever works the inbox (members of a
    policy's groups see their own tickets' decisions there)."""
    return can_audit(user) or works_inbox(user)


def audit_scope_q(user: Any) -> Q:
    """The decisions (Responses) this person's audit page and exports show: agent admins, staff
    observers and superusers every one; approvers and members of a policy's groups those of the
    tickets they may see."""
    from .models import PendingCall

    if not may_audit(user):
        return Q(pk__in=[])
    if audits_everything(user):
        return Q()
    return Q(pending_call__in=PendingCall.objects.filter(ticket_scope_q(user)).values("pk"))
