"""Bulk decisions from the inbox: each ticket decided on its own through approvals' services (same
rules, same record of who decided), each refusal reported with its reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adkweb.errors import Refused
from approvals import services as approvals
from approvals.models import PendingCall
from approvals.selectors import ticket_visible_get


@dataclass(frozen=True)
class BulkResult:
    ticket_id: int
    ticket: PendingCall | None
    ok: bool
    message: str


def tickets_for_bulk(*, ticket_ids: list[int], user: Any) -> list[PendingCall]:
    """The selected tickets the user may see, in the order selected."""
    found = [ticket_visible_get(user=user, ticket_id=pk) for pk in ticket_ids]
    return [ticket for ticket in found if ticket is not None]


def tickets_decide(*, ticket_ids: list[int], actor: Any, action: str, reason: str = "") -> list[BulkResult]:
    """Approve or reject each ticket in its own transaction; one refusal never undoes the others."""
    results = []
    for pk in ticket_ids:
        ticket = ticket_visible_get(user=actor, ticket_id=pk)
        if ticket is None:
            results.append(BulkResult(pk, None, False, f"Ticket #{pk} was not found."))
            continue
        try:
            if action == "approve":
                approvals.ticket_approve(ticket=ticket, actor=actor)
            else:
                approvals.ticket_reject(ticket=ticket, actor=actor, reason=reason)
        except Refused as exc:  # closed, not theirs to decide, an answer that does not fit
            results.append(BulkResult(pk, ticket, False, str(exc)))
            continue
        done = "Approved" if action == "approve" else "Rejected"
        results.append(BulkResult(pk, ticket, True, f"{done}; the agent is resuming."))
    return results
