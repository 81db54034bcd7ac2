"""Bulk decisions from the inbox: each ticket decided on its own through approvals' services (same
rules, same record of who decided), each refusal reported with its reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from adkweb.errors import Refused
from approvals import services as approvals
from approvals.models import PendingCall
from approvals.selectors import approval_progress, approval_refusal, ticket_visible_get
from approvals.templatetags.approvals_tags import edit_note


@dataclass(frozen=True)
class BulkResult:
    ticket_id: int
    ticket: PendingCall | None
    ok: bool
    message: str
    held: bool = False  # an approval recorded, the ticket waits for more approvers (M of N)


def tickets_for_bulk(*, ticket_ids: list[int], user: Any, action: str = "approve") -> list[PendingCall]:
    """The selected tickets the user may see, in the order selected, each with `bulk_refusal`: why
    this person may not decide it, or may not approve it here (shown on the confirmation), or ""."""
    found = [ticket_visible_get(user=user, ticket_id=pk) for pk in ticket_ids]
    tickets = [ticket for ticket in found if ticket is not None]
    for ticket in tickets:
        refusal = approval_refusal(user, ticket, action) if ticket.is_open else None
        why = f"you may not decide it: {refusal}" if refusal else ""
        if not why and action == "approve" and ticket.is_open:
            why = _edited_refusal(ticket)
        ticket.bulk_refusal = why  # type: ignore[attr-defined]
    return tickets


def _edited_refusal(ticket: PendingCall) -> str:
    """An approver edited the arguments: a bulk approval, which cannot say which arguments it approves,
    is refused (approvals.decision_plan.ArgumentsUnsaid); the ticket's page sends those it shows."""
    if not edit_note(ticket):
        return ""
    by = f" by {ticket.edited_by_label}" if ticket.edited_by_label else ""
    return f"its arguments were edited{by}: approve them on its page"


def tickets_decide(*, ticket_ids: list[int], actor: Any, action: str, reason: str = "") -> list[BulkResult]:
    """Approve or reject each ticket in its own transaction; one refusal never undoes the others."""
    results = []
    for pk in ticket_ids:
        ticket = ticket_visible_get(user=actor, ticket_id=pk)
        if ticket is None:
            results.append(BulkResult(pk, None, False, f"Ticket #{pk} was not found."))
            continue
        refusal = approval_refusal(actor, ticket, action) if ticket.is_open else None
        if refusal:  # the ticket page's rules, per ticket: never decided
            results.append(BulkResult(pk, ticket, False, f"Ticket #{pk}: you may not decide it: {refusal} Not sent."))
            continue
        try:
            if action == "approve":
                response = approvals.ticket_approve(ticket=ticket, actor=actor)
            else:
                response = approvals.ticket_reject(ticket=ticket, actor=actor, reason=reason)
        except Refused as exc:  # closed, not theirs to decide, an answer that does not fit
            results.append(BulkResult(pk, ticket, False, str(exc)))
            continue
        progress = approval_progress(response)
        if progress:
            message = f"{progress}; the agent resumes when another approver approves."
            results.append(BulkResult(pk, ticket, True, message, held=True))
            continue
        done = "Approved" if action == "approve" else "Rejected"
        results.append(BulkResult(pk, ticket, True, f"{done}; the agent is resuming."))
    return results
