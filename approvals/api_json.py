"""The approvals API's JSON shapes: a ticket (with what its policy made of it) and a recorded response
(split out of approvals.api, which answers with them)."""

from __future__ import annotations

from typing import Any

from django.urls import reverse

from adkweb.api import iso

from . import selectors
from .models import PendingCall, Response


def _username(user: Any) -> str | None:
    return user.get_username() if user else None


def ticket_json(ticket: PendingCall, *, responses: list[Response] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": ticket.pk,
        "url": reverse("approvals_api:pending-call", args=[ticket.pk]),
        "kind": ticket.kind,
        "status": ticket.status,
        "agent": ticket.app_name,
        "tool": ticket.tool_name or ticket.call_name,
        "call_id": ticket.call_id,
        "call_name": ticket.call_name,
        "args": ticket.args,
        "initial_response": ticket.initial_response,
        "hint": ticket.hint or None,
        "response_schema": ticket.response_schema,
        "session": {
            "app_name": ticket.session.app_name,
            "user_id": ticket.session.user_id,
            "session_id": ticket.session.session_id,
        },
        "requester": ticket.requester,
        "invocation_id": ticket.invocation_id,
        "assigned_to": _username(ticket.assigned_to),
        "due_at": iso(ticket.due_at),
        "created_at": iso(ticket.created_at),
        "updated_at": iso(ticket.updated_at),
        "closed_at": iso(ticket.closed_at),
        "closed_by": ticket.closed_by_name,
        **policy_fields(ticket, responses),
    }
    if responses is not None:
        data["responses"] = [response_json(r) for r in responses]
    return data


def policy_fields(ticket: PendingCall, responses: list[Response] | None = None) -> dict[str, Any]:
    """What a ticket's policy made of it (camelCase, as the policies API). `responses`: the ticket's,
    already read (its approvals are among them)."""
    policy = {
        "id": ticket.policy_id,
        "name": ticket.policy_name,
        "version": ticket.policy_version,
        "undecided": (ticket.policy_rules or {}).get("undecided") or None,
    }
    tally = selectors.approval_record(ticket=ticket, responses=responses)
    return {
        "policy": policy if ticket.policy_name else None,
        "requiredApprovals": ticket.required_approvals,
        "approvals": [_approval(r) for r in tally.counted],
        "lapsedApprovals": [_approval(r) for r in tally.lapsed],
        "approvalsRecorded": tally.recorded,
        "fourEyes": ticket.four_eyes,
        "approverGroups": selectors.ticket_approver_groups(ticket=ticket),
        "dueAt": iso(ticket.due_at),
        "remindAt": iso(ticket.remind_at),
        "escalateAt": iso(ticket.escalate_at),
        "escalatedAt": iso(ticket.escalated_at),
        "passedOver": (ticket.policy_rules or {}).get("passed_over") or [],
        "argsHash": ticket.args_hash,
        "editedArgs": ticket.edited_args,
        "editedBy": ticket.edited_by_name,
        "editedAt": iso(ticket.edited_at),
    }


def _approval(response: Response) -> dict[str, Any]:
    return {"who": response.actor_username or None, "when": iso(response.created_at), "source": response.source}


def response_json(response: Response) -> dict[str, Any]:
    return {
        "id": response.pk,
        "pending_call": response.pending_call_id,
        "action": response.action,
        "response": response.payload,
        "final": response.final,
        "comment": response.comment,
        "actor": response.actor_username or None,
        "actorName": response.actor_name or None,
        "turn": response.turn_id,
        "created_at": iso(response.created_at),
        "source": response.source,
        "grant": response.grant_id,
        "argsHash": response.args_hash or None,
        "editedArgs": response.edited_args,
    }
