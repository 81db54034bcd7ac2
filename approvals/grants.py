"""Standing grants: "also allow this tool for this conversation (or this user) for the next N
minutes", given by an approver with an approval (or afterwards from the approved ticket), revoked on the
grants page or over the API. While a grant lasts, a matching ticket is approved as it opens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from adkweb.errors import Conflict, Forbidden, Invalid
from adkweb.roles import is_policy_admin

from . import events
from .models import PendingCall, StandingGrant, TicketActivity
from .permissions import decide_refusal, routed_to

MAX_MINUTES = 30 * 24 * 60  # thirty days
GRANTABLE_KINDS = (PendingCall.Kind.LONG_RUNNING, PendingCall.Kind.CONFIRMATION)


@dataclass(frozen=True)
class GrantSpec:
    scope: str  # "session" or "user"
    minutes: int


def grant_refusal(ticket: PendingCall) -> str | None:
    """Why no grant may be given from this ticket, or None."""
    if ticket.kind not in GRANTABLE_KINDS:
        return f"Standing grants are for tools, not for a {ticket.get_kind_display()}."
    if not ticket.allow_grants:
        return f"The policy {ticket.policy_name!r} forbids standing grants for this tool."
    if ticket.required_approvals > 1:
        return f"This tool needs {ticket.required_approvals} approvals each time; a standing grant would skip them."
    return None


def _check(ticket: PendingCall, actor: Any, spec: GrantSpec) -> None:
    if spec.scope not in StandingGrant.Scope.values:
        raise Invalid('A grant\'s scope is "session" (this conversation) or "user" (this user).')
    if not isinstance(spec.minutes, int) or isinstance(spec.minutes, bool) or not 1 <= spec.minutes <= MAX_MINUTES:
        raise Invalid(f"A grant lasts from 1 to {MAX_MINUTES} minutes (30 days).")
    refusal = grant_refusal(ticket)
    if refusal:
        raise Conflict(refusal)
    who = decide_refusal(actor, ticket)
    if who:
        raise Forbidden(f"You may not give a standing grant for ticket #{ticket.pk}: {who}")
    if ticket.status != PendingCall.Status.APPROVED:  # a decision's grant: its ticket is approved by now
        state = "is still open" if ticket.is_open else f"was {ticket.get_status_display()}, not approved"
        raise Conflict(
            f"Ticket #{ticket.pk} {state}: a standing grant comes only from an approved ticket"
            + (" (approve it with a grant)." if ticket.is_open else ".")
        )


def _like(ticket: PendingCall, scope: str) -> Q:
    """Grants that approve what a grant of this scope from this ticket would (grant_matching's terms)."""
    who = Q(session=ticket.session_id) if scope == StandingGrant.Scope.SESSION else Q(requester=ticket.requester)
    return who & Q(
        scope=scope, app_name=ticket.app_name, tool_name=ticket.tool_name, kind=ticket.kind, policy=ticket.policy_id
    )


def duplicate_refusal(ticket: PendingCall, scope: str) -> Conflict | None:
    """A like grant in force refuses another (409): two would leave revoking one with the other still
    approving."""
    like = StandingGrant.objects.filter(_like(ticket, scope), revoked_at__isnull=True, expires_at__gt=timezone.now())
    existing = like.select_related("created_by").order_by("created_at", "id").first()
    if existing is None:
        return None
    until = timezone.localtime(existing.expires_at).strftime("%Y-%m-%d %H:%M %Z")
    return Conflict(
        f"Standing grant #{existing.pk} already allows {existing.tool_name} for {existing.get_scope_display()} "
        f"({existing.requester}), given by {existing.created_by.get_username()} until {until}. "
        "Revoke it first to give another (or approve without a grant)."
    )


def grant_give(*, ticket: PendingCall, actor: Any, spec: GrantSpec) -> StandingGrant:
    """Record a grant from a ticket its giver may decide (called inside the decision's transaction,
    or alone from the grants API). One like grant in force at most, also when two are given at once
    (the database's constraints: the second's INSERT waits for the first and fails)."""
    _check(ticket, actor, spec)
    refusal = duplicate_refusal(ticket, spec.scope)
    if refusal:
        raise refusal
    # Like grants that ended give up their place (revocations here retire theirs as they happen).
    ended = Q(revoked_at__isnull=False) | Q(expires_at__lte=timezone.now())
    StandingGrant.objects.filter(_like(ticket, spec.scope), ended, current=True).update(current=False)
    try:
        with transaction.atomic():
            grant = _insert(ticket, actor, spec)
    except IntegrityError as exc:  # a like grant given at the same moment came first
        raise duplicate_refusal(ticket, spec.scope) or Conflict(
            "A like standing grant was given at the same moment; try again."
        ) from exc
    TicketActivity.objects.create(
        ticket=ticket,
        kind=TicketActivity.Kind.GRANTED,
        actor=actor,
        message=f"Standing grant #{grant.pk}: {ticket.tool_name} allowed for {grant.get_scope_display()} "
        f"({ticket.requester}) for {spec.minutes} minutes.",
        detail={"grant": grant.pk, "scope": spec.scope, "minutes": spec.minutes},
    )
    events.after_commit_ticket_changed(ticket)
    return grant


def _insert(ticket: PendingCall, actor: Any, spec: GrantSpec) -> StandingGrant:
    return StandingGrant.objects.create(
        scope=spec.scope,
        app_name=ticket.app_name,
        tool_name=ticket.tool_name,
        kind=ticket.kind,
        requester=ticket.requester,
        session=ticket.session if spec.scope == StandingGrant.Scope.SESSION else None,
        policy=ticket.policy,
        ticket=ticket,
        created_by=actor,
        expires_at=timezone.now() + timedelta(minutes=spec.minutes),
    )


@transaction.atomic
def grant_create(*, ticket: PendingCall, actor: Any, spec: GrantSpec) -> StandingGrant:
    """A grant from an approved ticket (the grants API); any other is refused (409)."""
    ticket = PendingCall.objects.select_for_update(of=("self",)).get(pk=ticket.pk)
    return grant_give(ticket=ticket, actor=actor, spec=spec)


def can_revoke(user: Any, grant: StandingGrant) -> bool:
    """Its giver, and whoever manages policies (agent admins), revoke a grant."""
    return bool(user and user.is_authenticated and (grant.created_by_id == user.pk or is_policy_admin(user)))


@transaction.atomic
def grant_revoke(*, grant: StandingGrant, actor: Any) -> StandingGrant:
    """End a grant now; revoking an ended one is refused (409)."""
    grant = StandingGrant.objects.select_for_update().get(pk=grant.pk)
    if not can_revoke(actor, grant):
        raise Forbidden("Only whoever gave a standing grant, or a policy admin, may revoke it.")
    if grant.revoked_at is not None:
        raise Conflict(f"Standing grant #{grant.pk} was already revoked.")
    if grant.expires_at <= timezone.now():
        raise Conflict(f"Standing grant #{grant.pk} has already ended.")
    grant.revoked_at, grant.revoked_by, grant.current = timezone.now(), actor, False
    grant.save(update_fields=["revoked_at", "revoked_by", "current"])
    return grant


def grants_revoke_for_policy(*, policy: Any, actor: Any) -> int:
    """A deleted policy's grants end with it (they were given under its rules). Every one of them gives up
    its place among like grants too, the ended ones included: the delete sets their policy to NULL, where
    a policy-less like grant holding its place would collide with them (the constraints' Coalesce)."""
    active = StandingGrant.objects.filter(policy=policy, revoked_at__isnull=True, expires_at__gt=timezone.now())
    reason = f"Ended with its policy {policy.name!r}, deleted by {actor.get_username()}."[:200]
    ended = active.update(revoked_at=timezone.now(), revoked_by=actor, current=False, revoked_reason=reason)
    StandingGrant.objects.filter(policy=policy, current=True).update(current=False)
    return ended


def grant_matching(ticket: PendingCall) -> StandingGrant | None:
    """The oldest active grant that approves this newly opened ticket at once: same agent, tool and
    kind, the same conversation (or requester), the same policy, and a giver who could decide it."""
    if grant_refusal(ticket) is not None:
        return None
    where = Q(scope=StandingGrant.Scope.SESSION, session=ticket.session) | Q(
        scope=StandingGrant.Scope.USER, requester=ticket.requester
    )
    candidates = StandingGrant.objects.filter(
        where,
        app_name=ticket.app_name,
        tool_name=ticket.tool_name,
        kind=ticket.kind,
        policy=ticket.policy,
        revoked_at__isnull=True,
        expires_at__gt=timezone.now(),
    ).select_related("created_by")
    for grant in candidates.order_by("created_at", "id"):
        giver = grant.created_by
        if giver.is_active and routed_to(giver, ticket) and decide_refusal(giver, ticket) is None:
            return grant
    return None
