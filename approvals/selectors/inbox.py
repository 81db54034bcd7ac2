"""Reads on the human side: the inbox (its filters, pages, counts and menus) and the tickets one
person may see in it."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from django.db import connection
from django.db.models import Prefetch, Q, QuerySet, prefetch_related_objects

from adkweb.compiled import compiled
from adkweb.http import number
from adkweb.paging import (
    COUNT_CAP,
    KeysetPage,
    Narrow,
    Source,
    capped_count,
    capped_count_narrowed,
    keyset_page,
    keyset_page_of,
)
from adkweb.roles import is_approver, is_observer

from ..models import PendingCall, Response
from ..permissions import visible_q
from .deciders import LOADED
from .mine import mine_arms, mine_narrow
from .tickets import TALLY_ROWS, cancel_records_attach, deciding

INBOX_PAGE_SIZE = 25
SORTS = ("newest", "oldest")  # an inbox's orders (InboxFilters.sort), the first its default
SEARCH_MAX = 200  # characters of an inbox's search (the page's box, the API's `q`)
# Tickets of these kinds are named after ADK's own call (approvals.services.KIND_BY_CALL_NAME).
QUESTION_CALL_NAMES = ("adk_request_input", "get_user_choice", "adk_request_credential")
CLOSED_STATUSES = tuple(s for s in PendingCall.Status.values if s not in PendingCall.OPEN_STATUSES)
# What an inbox row shows of each ticket besides its own columns (approvals.rows.inbox_row): who closed it,
# who is assigned it, who edited its arguments; joined to the rows' query.
ROW_RELATED = ("closed_by", "assigned_to", "edited_by")


def open_ticket_count(*, user: Any) -> int:
    """Open tickets this person may see (the navigation's count), counted up to COUNT_CAP + 1
    (adkweb.paging: more reads "1,000+"). Every page asks it: its SQL is built once per process for
    each way of seeing tickets (what `visible_q` depends on), then only executed (building and
    compiling the ORM query cost more CPU than PostgreSQL's answer; issue 12, target 4)."""
    if not (user and user.is_authenticated):
        return capped_count(PendingCall.objects.filter(visible_q(user), status__in=PendingCall.OPEN_STATUSES))

    def count_sql() -> tuple[str, tuple]:
        qs = PendingCall.objects.filter(visible_q(user), status__in=PendingCall.OPEN_STATUSES)
        sql, params = qs.order_by().values("pk")[: COUNT_CAP + 1].query.sql_with_params()
        return f"SELECT COUNT(*) FROM ({sql}) subquery", tuple(params)

    with connection.cursor() as cursor:
        cursor.execute(*compiled("open_ticket_count", visibility_key(user), count_sql))
        return cursor.fetchone()[0]


def visibility_key(user: Any) -> tuple:
    """Everything approvals.permissions.visible_q builds its filter from, for a logged-in person
    (their groups are read by the query itself)."""
    return (user.pk, user.get_username(), bool(user.is_superuser), is_observer(user), is_approver(user))


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
    after: str = ""  # keyset cursors (adkweb.paging): the pager's links carry them
    before: str = ""


def _status_q(status: str) -> Q:
    if status == "all":
        return Q()
    if status == "closed":
        return Q(status__in=CLOSED_STATUSES)
    if status in PendingCall.Status.values:
        return Q(status=status)
    return Q(status__in=PendingCall.OPEN_STATUSES)


def _search_pk(term: str) -> int | None:
    """The ticket a search for "#12" or "12" also finds."""
    return number(term.lstrip("#"))


def ticket_queryset(*, filters: InboxFilters, user: Any) -> QuerySet[PendingCall]:
    """Tickets this person may see that match an inbox's filters (index-friendly: status/created_at,
    app_name, tool_name, kind)."""
    return _ticket_queryset(filters, user, _search_pk(filters.q.strip()))


def _ticket_queryset(filters: InboxFilters, user: Any, search_pk: int | None) -> QuerySet[PendingCall]:
    qs = PendingCall.objects.filter(_status_q(filters.status)).filter(visible_q(user))
    if filters.agent:
        qs = qs.filter(app_name=filters.agent)
    if filters.tool:
        qs = qs.filter(tool_name=filters.tool)
    if filters.kind:
        qs = qs.filter(kind=filters.kind)
    if filters.mine:
        qs = qs.filter(Q(*mine_arms(user), _connector=Q.OR))
    if filters.q:
        term = filters.q.strip()
        # The arguments as asked and as edited (shown), tool, requester: trigram indexes (migrations 0005, 0015).
        match = Q(args__icontains=term) | Q(edited_args__icontains=term)
        match |= Q(tool_name__icontains=term) | Q(requester__icontains=term)
        if search_pk is not None:
            match |= Q(pk=search_pk)
        qs = qs.filter(match)
    order = ("created_at", "id") if filters.sort == "oldest" else ("-created_at", "-id")
    return qs.select_related(*ROW_RELATED).order_by(*order)


def approvals_attach(tickets: list[PendingCall]) -> list[PendingCall]:
    """Load the approvals of the quorum tickets among `tickets` in one query ("1 of 2 approvals"), each
    saying whether its giver may still decide its ticket (`deciding`), with a closed one's closing
    decision (its record of which counted), none when there are none: `ticket_approvals` then reads
    them from the ticket."""
    quorum = {t.pk: t for t in tickets if t.required_approvals > 1}
    for t in tickets:
        setattr(t, TALLY_ROWS, [])
    if quorum:
        rows = Response.objects.filter(Q(action=Response.Action.APPROVE) | Q(final=True), pending_call_id__in=quorum)
        for r in deciding(rows.select_related("actor").order_by("created_at", "id")):
            getattr(quorum[r.pending_call_id], TALLY_ROWS).append(r)
    cancel_records_attach(tickets)
    return tickets


def _inbox_source(
    filters: InboxFilters, user: Any, search_pk: int | None = None
) -> tuple[QuerySet[PendingCall], Narrow | None]:
    """The inbox's queryset, and how to read its first rows: "mine" from its participants' table.
    `search_pk`: the ticket its search also finds (`_search_pk`: given, it may stand in for another)."""
    if filters.mine:
        qs = _ticket_queryset(replace(filters, mine=False), user, search_pk)
        return qs, mine_narrow(user, filters.status, ROW_RELATED)
    return _ticket_queryset(filters, user, search_pk), None


def _inbox_shape(filters: InboxFilters, user: Any, related: tuple[str, ...]) -> tuple[tuple, Source, tuple]:
    """An inbox's queries as adkweb.paging.keyset_page_of reads them: their shape (who sees, the
    status, order, "mine", which filters are set, what else is loaded), a source of the queryset from
    the filters' values, and those values (the agent, tool, kind, search and the ticket it finds)."""
    term = filters.q.strip()
    search_pk = _search_pk(term) if term else None
    values = {"agent": filters.agent, "tool": filters.tool, "kind": filters.kind, "q": term}
    names = tuple(name for name, v in values.items() if v)
    args: tuple = tuple(values[name] for name in names)
    if search_pk is not None:
        args += (search_pk,)
    key = (visibility_key(user), filters.status, filters.sort, filters.mine, names, search_pk is not None, related)

    def source(*a: Any) -> tuple[QuerySet[PendingCall], Narrow | None]:
        given = dict(zip(names, a, strict=False))
        shaped = replace(filters, **{name: given.get(name, "") for name in values})
        return _inbox_source(shaped, user, a[len(names)] if search_pk is not None else None)

    return key, source, args


# What the approvals API shows of each ticket in a list: its conversation, policy and editor, and who
# decides it (approvals.api_json.ticket_json); the first three can be joined.
JOINABLE = ("session", "edited_by", "policy")
GROUP_RELATIONS = ("approver_groups", "escalation_groups")
API_TICKET_RELATED = (*JOINABLE, *GROUP_RELATIONS)


def inbox_page(
    *, filters: InboxFilters, user: Any, per_page: int = INBOX_PAGE_SIZE, related: tuple[str, ...] = ()
) -> KeysetPage:
    """One page of the inbox (by keyset when the pager's link carries a cursor), with a capped count:
    a constant number of queries (count, rows, and the approvals of quorum tickets if any). `related`:
    what else of each ticket to load (the API's ticket list: `API_TICKET_RELATED`), a query each at most
    (joined where the rows are read from the tickets, prefetched where "mine" reads them another way)."""
    joined = tuple(r for r in related if r in JOINABLE)  # (select_related() with none would join every FK)
    paging: dict[str, Any] = {
        "sort_field": "created_at",
        "descending": filters.sort != "oldest",
        "per_page": per_page,
        "page": filters.page,
        "after": filters.after,
        "before": filters.before,
    }
    if not (user and user.is_authenticated):  # nothing to see (and no visibility_key to name a shape by)
        qs, narrow = _inbox_source(filters, user)
        page = keyset_page(qs, narrow=narrow, **paging)
    else:
        key, source, args = _inbox_shape(filters, user, joined)

        def sourced(*a: Any) -> tuple[QuerySet[PendingCall], Narrow | None]:
            qs, narrow = source(*a)
            return (qs.select_related(*joined) if joined else qs), narrow

        page = keyset_page_of("inbox_page", key, sourced, args, **paging)
    if related:  # skips what the join already loaded; many-to-many ones as lists (`loaded_groups`)
        lookups = [Prefetch(r, to_attr=f"{r}{LOADED}") if r in GROUP_RELATIONS else r for r in related]
        prefetch_related_objects(page.object_list, *lookups)
    page.object_list = approvals_attach(page.object_list)
    return page


def counts_open_tickets(filters: InboxFilters) -> bool:
    """Whether an inbox with these filters counts what the nav badge counts (every open ticket the
    person may see)."""
    return filters.status == "open" and not (filters.agent or filters.tool or filters.kind or filters.mine or filters.q)


def inbox_count(*, filters: InboxFilters, user: Any) -> int:
    """How many tickets match an inbox's filters, up to COUNT_CAP + 1 (adkweb.paging)."""
    return capped_count_narrowed(*_inbox_source(filters, user))


def ticket_matches(*, ticket_id: int, filters: InboxFilters, user: Any) -> bool:
    return ticket_queryset(filters=filters, user=user).filter(pk=ticket_id).exists()


def inbox_filter_choices(*, filters: InboxFilters | None = None) -> dict[str, list[str]]:
    """Agents and tools for the filter menus, from the agents' configuration (no scan of the
    tickets): every app, and every tool an agent is configured with or the code registry holds;
    the values of the filters in use stay in the menus too."""
    from agents_app.agents import menus

    configured = menus()
    agents, tools = set(configured.apps), set(configured.tools) | set(QUESTION_CALL_NAMES)
    if filters is not None:
        agents.update(v for v in [filters.agent] if v)
        tools.update(v for v in [filters.tool] if v)
    return {"agents": sorted(agents), "tools": sorted(tools)}


# The approvals API's status filter (approvals.api): the inbox's and every single status.
API_STATUS_FILTERS = ("open", "closed", "all", *PendingCall.Status.values)
