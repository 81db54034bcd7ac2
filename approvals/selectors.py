"""Reads on the human side."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Exists, OuterRef, Q, QuerySet

from adkweb.roles import APPROVERS, DECIDE_TICKETS, is_approver, is_observer

from .models import PendingCall, Response
from .permissions import can_decide_ticket, can_view_ticket

INBOX_PAGE_SIZE = 25
CLOSED_STATUSES = tuple(s for s in PendingCall.Status.values if s not in PendingCall.OPEN_STATUSES)


def open_ticket_count() -> int:
    return PendingCall.objects.filter(status__in=PendingCall.OPEN_STATUSES).count()


@dataclass(frozen=True)
class InboxFilters:
    """What an inbox shows: status is "open" (default), "closed", "all" or one status."""

    agent: str = ""
    tool: str = ""
    status: str = "open"
    kind: str = ""
    mine: bool = False
    q: str = ""
    sort: str = "newest"
    page: int = 1


def _status_q(status: str) -> Q:
    if status == "all":
        return Q()
    if status == "closed":
        return Q(status__in=CLOSED_STATUSES)
    if status in PendingCall.Status.values:
        return Q(status=status)
    return Q(status__in=PendingCall.OPEN_STATUSES)


def ticket_queryset(*, filters: InboxFilters, user: Any) -> QuerySet[PendingCall]:
    """Tickets matching an inbox's filters (index-friendly: status/created_at, app_name, tool_name, kind)."""
    qs = PendingCall.objects.filter(_status_q(filters.status))
    if filters.agent:
        qs = qs.filter(app_name=filters.agent)
    if filters.tool:
        qs = qs.filter(tool_name=filters.tool)
    if filters.kind:
        qs = qs.filter(kind=filters.kind)
    if filters.mine:
        # Mine: assigned to me, closed by me, or I have sent it a response (e.g. an update).
        responded = Response.objects.filter(pending_call=OuterRef("pk"), actor=user)
        qs = qs.filter(Q(assigned_to=user) | Q(closed_by=user) | Exists(responded))
    if filters.q:
        term = filters.q.strip()
        match = Q(args__icontains=term) | Q(tool_name__icontains=term) | Q(requester__icontains=term)
        if term.lstrip("#").isdigit():
            match |= Q(pk=int(term.lstrip("#")))
        qs = qs.filter(match)
    order = ("created_at", "id") if filters.sort == "oldest" else ("-created_at", "-id")
    return qs.select_related("closed_by", "assigned_to").order_by(*order)


def inbox_page(*, filters: InboxFilters, user: Any) -> Page:
    """One page of the inbox."""
    paginator = Paginator(ticket_queryset(filters=filters, user=user), INBOX_PAGE_SIZE)
    return paginator.get_page(filters.page)


def ticket_matches(*, ticket_id: int, filters: InboxFilters, user: Any) -> bool:
    return ticket_queryset(filters=filters, user=user).filter(pk=ticket_id).exists()


def inbox_filter_choices() -> dict[str, list[str]]:
    """Agents and tools that have tickets, for the filter menus (small: distinct on indexed columns)."""
    from agents_app.agents import app_names

    seen = PendingCall.objects.order_by().values_list("app_name", flat=True).distinct()
    return {
        "agents": sorted(set(app_names()) | set(seen)),
        "tools": sorted(t for t in PendingCall.objects.order_by().values_list("tool_name", flat=True).distinct() if t),
    }


def ticket_get(*, ticket_id: int) -> PendingCall | None:
    return PendingCall.objects.select_related("session", "closed_by", "assigned_to").filter(pk=ticket_id).first()


def ticket_responses(*, ticket: PendingCall) -> list[Response]:
    return list(Response.objects.filter(pending_call=ticket).select_related("actor").order_by("created_at", "id"))


# -- the approvals HTTP API (approvals.api) --------------------------------------------------------
API_STATUS_FILTERS = ("open", "closed", "all", *PendingCall.Status.values)


def tickets_visible(*, user: Any, filters: InboxFilters) -> QuerySet[PendingCall]:
    """Tickets the user may see (approvers and observers: all; others: their own sessions'), filtered."""
    qs = ticket_queryset(filters=filters, user=user).select_related("session")
    if not (is_approver(user) or is_observer(user)):
        qs = qs.filter(requester=user.get_username())
    return qs


def ticket_visible_get(*, user: Any, ticket_id: int) -> PendingCall | None:
    """One ticket if it exists and the user may see it, else None (the API answers 404 either way)."""
    ticket = ticket_get(ticket_id=ticket_id)
    return ticket if ticket is not None and can_view_ticket(user, ticket) else None


# -- who decides a ticket (notifications ask whom to tell; policies extend these) ------------------
def args_hash(args: Any) -> str:
    """sha256 hex of a ticket's arguments as canonical JSON: binds a decision to what was shown."""
    canonical = json.dumps(args, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def ticket_approver_groups(*, ticket: PendingCall) -> list[str]:
    """The groups a ticket is routed to. Until policies route tickets, every ticket goes to approvers."""
    return [APPROVERS]


def can_decide(user: Any, ticket: PendingCall) -> bool:
    """Whether this person may decide this ticket now (an active, eligible decider)."""
    return bool(user and user.is_active and can_decide_ticket(user, ticket))


def ticket_deciders(*, ticket: PendingCall) -> list[Any]:
    """Everyone who may decide this ticket now: active people with the decide permission (through a
    group such as approvers, directly, or as superusers)."""
    from django.contrib.auth import get_user_model

    people = get_user_model().objects.with_perm(DECIDE_TICKETS, backend="django.contrib.auth.backends.ModelBackend")
    return [user for user in people.filter(is_active=True).order_by("pk") if can_decide(user, ticket)]
