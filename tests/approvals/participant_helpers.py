"""The inbox's "mine" table (approvals.models.TicketParticipant) against what it is derived from."""

from __future__ import annotations

from approvals.models import PendingCall, Response, TicketParticipant

Row = tuple[int, int, object, bool]  # ticket, person, the ticket's created_at, open


def truth() -> set[Row]:
    """Who takes part in which ticket, from the tickets and the record: assigned, closed by, responded."""
    tickets = {t.pk: t for t in PendingCall.objects.all()}
    pairs = {(t.pk, who) for t in tickets.values() for who in (t.assigned_to_id, t.closed_by_id) if who}
    pairs |= set(Response.objects.exclude(actor=None).values_list("pending_call_id", "actor_id"))
    return {(t, who, tickets[t].created_at, tickets[t].is_open) for t, who in pairs}


def stored() -> set[Row]:
    return set(TicketParticipant.objects.values_list("ticket_id", "person_id", "created_at", "is_open"))


def exact() -> set[Row]:
    """The stored rows, asserted equal to the truth (and returned, for what a test expects of them)."""
    rows = stored()
    assert rows == truth()
    assert TicketParticipant.objects.count() == len(rows)  # no duplicate pair
    return rows


def part(ticket: PendingCall, person: object) -> tuple[int, int]:
    return ticket.pk, person.pk  # type: ignore[attr-defined]


def pairs(rows: set[Row]) -> dict[tuple[int, int], bool]:
    """{(ticket, person): open}."""
    return {(t, who): is_open for t, who, _, is_open in rows}
