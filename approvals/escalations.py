"""A ticket's escalation recorded: its `escalated_at` (its escalation time) and the "Escalated" entry of
its history, once, under the ticket's row lock. The clock opens a ticket to its escalation groups
(approvals.permissions.escalated); this writes it down, from whichever comes first after that time: the
deadline sweep (approvals.deadlines.ticket_escalate) or a decision (approvals.decisions), whose own
transaction then holds the record of who could decide it and why. The other finds it written."""

from __future__ import annotations

from . import events
from .models import PendingCall, TicketActivity
from .permissions import escalated


def escalation_record(ticket: PendingCall, *, tell: bool) -> bool:
    """Record the escalation of this open ticket, locked by the caller (FOR UPDATE: the sweep and a
    decision never both write it), if its escalation time has come and nobody recorded it yet; `tell`:
    tell the people it now reaches (a ticket still open after this transaction). Whether it wrote."""
    if ticket.escalated_at is not None or ticket.escalate_at is None or not escalated(ticket):
        return False
    names = sorted(ticket.escalation_groups.values_list("name", flat=True))
    ticket.escalated_at = ticket.escalate_at
    ticket.save(update_fields=["escalated_at", "updated_at"])
    TicketActivity.objects.create(
        ticket=ticket,
        kind=TicketActivity.Kind.ESCALATED,
        message=f"Escalated to {', '.join(names)}: no decision yet.",
        detail={"groups": names},
    )
    if tell:
        events.deadline_reached(events.TICKET_ESCALATED, ticket=ticket, data={"groups": names})
    return True
