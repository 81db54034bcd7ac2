"""Reads on the human side: one ticket (its page's parts) and its approvals' tally, open or as its close
recorded it (who decides it: `deciders`)."""

from __future__ import annotations

from typing import Any, NamedTuple

from django.db.models import Q, QuerySet

from adkweb.compiled_objects import objects

from ..models import PendingCall, Response, TicketActivity
from ..permissions import can_view_ticket, decides_q

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
    decision recorded as counting then (Response.counted, with itself when it is an approval), or a
    cancelled one's cancel (`cancel_record`: the held approvals that would have counted), whoever may
    decide now; closed with no record (before it was kept), every approval, none apart (who could decide
    then is not known), `recorded` False. They all stay in its history. `responses`:
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
    if closing is None and ticket.status == PendingCall.Status.CANCELLED:
        held = cancel_record(ticket)  # its cancel's record of the held approvals that counted
        if held is not None:
            return _recorded(approvals, set(held))
    if closing is None or closing.counted is None:
        return Tally(_one_each(approvals), [], False)
    itself = [closing.pk] if closing.action == Response.Action.APPROVE else []
    return _recorded(approvals, {*closing.counted, *itself})


CANCEL_RECORD = "cancel_record"  # a cancelled quorum ticket's record, prefetched by `cancel_records_attach`


def cancel_record(ticket: PendingCall) -> list[int] | None:
    """The held approvals (Response ids) a cancelled ticket's cancel recorded as counting then
    (approvals.services._cancel: its history entry's `detail`), or None when it recorded none (cancelled
    before it was kept). A ticket that needs one approval holds none: [] without a query."""
    if ticket.required_approvals <= 1:
        return []
    if not hasattr(ticket, CANCEL_RECORD):
        cancel_records_attach([ticket])
    return getattr(ticket, CANCEL_RECORD)


def cancel_records_attach(tickets: list[PendingCall]) -> None:
    """`cancel_record` for the cancelled quorum tickets among `tickets`, in one query (a list's tickets)."""
    cancelled = {t.pk: t for t in tickets if t.status == PendingCall.Status.CANCELLED and t.required_approvals > 1}
    for t in cancelled.values():
        setattr(t, CANCEL_RECORD, None)
    if cancelled:
        kind = TicketActivity.Kind.CANCELLED
        entries = TicketActivity.objects.filter(ticket_id__in=cancelled, kind=kind, detail__isnull=False)
        for pk, detail in entries.order_by("id").values_list("ticket_id", "detail"):
            if isinstance(detail, dict) and isinstance(detail.get("counted"), list):
                setattr(cancelled[pk], CANCEL_RECORD, detail["counted"])


def _recorded(approvals: list[Response], ids: set[int]) -> Tally:
    """A closed ticket's approvals as its close recorded them: those that counted (`ids`), the rest apart."""
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
