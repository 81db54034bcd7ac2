"""Live updates for tickets: the approvals inbox group and its typed payload."""

from __future__ import annotations

from typing import Literal, TypedDict

from adkweb.live import group_send
from agents_app.events import session_group

APPROVALS_GROUP = "approvals"


class TicketChangedMessage(TypedDict):
    type: Literal["ticket.changed"]
    ticket_id: int
    session_pk: int


def notify_ticket_changed(*, ticket_id: int, session_pk: int, inbox: bool = True) -> None:
    """A ticket was opened, answered or closed: inboxes, the ticket page and its conversation update.
    `inbox=False`: only its pages (e.g. its notification status changed; the inbox row did not)."""
    msg = TicketChangedMessage(type="ticket.changed", ticket_id=ticket_id, session_pk=session_pk)
    if inbox:
        group_send(APPROVALS_GROUP, msg)
    group_send(session_group(session_pk), msg)
