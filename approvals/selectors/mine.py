"""The inbox's "mine": the tickets assigned to a person, closed by them, or that they have sent a response
(e.g. an update). Defined on the tickets (`mine_arms`: one ticket, the API's list) and read for the inbox's
pages from who takes part in which ticket (`mine_narrow`: approvals.models.TicketParticipant)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import EmptyResultSet
from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.db.models.expressions import RawSQL

from adkweb.paging import Bound, Narrow

from ..models import PendingCall, Response, TicketParticipant


def mine_arms(user: Any) -> list[Q]:
    """Mine: assigned to me or closed by me, or I have sent it a response (e.g. an update). The definition,
    for one ticket (`ticket_matches`) and the API's list; the inbox's pages read the same set from
    TicketParticipant (`mine_narrow`)."""
    responded = Response.objects.filter(pending_call=OuterRef("pk"), actor=user)
    return [Q(assigned_to=user) | Q(closed_by=user), Q(Exists(responded))]


def _open_state(status: str) -> bool | None:
    """What an inbox's status filter (inbox._status_q) asks of a ticket's open state; None: either."""
    if status == "all":
        return None
    if status == "closed":
        return False
    return status in PendingCall.OPEN_STATUSES if status in PendingCall.Status.values else True


def mine_narrow(user: Any, status: str, related: tuple[str, ...]) -> Narrow:
    """ "Mine" read from who takes part in which ticket (adkweb.paging.Narrow; approvals.models.
    TicketParticipant, kept by the database's triggers): the person's rows in the inbox's order, those
    of open (or closed) tickets from their own index when the status filter asks, from the page's
    keyset bound on, each ticket kept if the inbox's other filters (visibility, status, agent, search)
    keep it, until n, with `related` joined (the inbox row's). Read from the tickets, "mine, open"
    probed every open ticket for a response of the person's (10,000 at the bench's size, ~60 ms); as
    one OR it hashed every response they ever sent. The same rows as `mine_arms` say: the triggers keep
    the table equal to those three sets."""
    quote = connection.ops.quote_name
    parts = quote(TicketParticipant._meta.db_table)
    is_open = _open_state(status)

    def narrow(qs: QuerySet[PendingCall], n: int, order: tuple[str, ...], bound: Bound | None) -> QuerySet[PendingCall]:
        if user.pk is None:
            return PendingCall.objects.none()
        try:
            tickets, params = qs.order_by().values("pk").query.sql_with_params()
        except EmptyResultSet:  # a filter no row can match
            return PendingCall.objects.none()
        where, args = ["p.person_id = %s"], [user.pk]
        if is_open is not None:
            where.append("p.is_open" if is_open else "NOT p.is_open")
        if bound is not None:
            bound_sql, bound_params = bound("p.created_at", "p.ticket_id")
            where.append(f"({bound_sql})")
            args += bound_params
        where.append(f"p.ticket_id IN ({tickets})")
        args += params
        sql = f"SELECT p.ticket_id FROM {parts} p WHERE {' AND '.join(where)}"
        if order:
            way = " DESC" if order[0].startswith("-") else ""
            sql += f" ORDER BY p.created_at{way}, p.ticket_id{way}"
        sql += f" LIMIT {int(n)}"
        return PendingCall.objects.filter(pk__in=RawSQL(sql, args)).select_related(*related)

    return narrow
