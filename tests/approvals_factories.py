"""Factories for approvals tests: a conversation and tickets of each kind, no agent run needed."""

from __future__ import annotations

import itertools
from typing import Any

from agents_app import services as agent_services
from approvals.models import PendingCall

_ids = itertools.count(1)


def session_for(user_id: str = "requester", app_name: str = "reimbursement_agent"):
    return agent_services.session_create(app_name=app_name, user_id=user_id)


def ticket(*, session=None, kind: str = "long_running", **fields: Any) -> PendingCall:
    session = session or session_for()
    n = next(_ids)
    defaults: dict[str, Any] = dict(
        session=session,
        app_name=session.app_name,
        requester=session.user_id,
        kind=kind,
        call_id=f"call-{n}",
        call_name="ask_for_approval",
        tool_name="ask_for_approval",
        args={"purpose": "meals", "amount": 200.0},
        initial_response={"status": "pending", "ticket-id": f"approval-ticket-{n:04d}"},
    )
    if kind == "confirmation":
        defaults.update(
            call_name="adk_request_confirmation",
            tool_name="transfer_money",
            initial_response=None,
            args={
                "originalFunctionCall": {
                    "name": "transfer_money",
                    "id": "fc-1",
                    "args": {"amount": 500.0, "recipient": "Bob"},
                },
                "toolConfirmation": {
                    "hint": "Please approve or reject the tool call transfer_money()",
                    "confirmed": False,
                },
            },
        )
    if kind == "input":
        defaults.update(
            call_name="adk_request_input",
            tool_name="adk_request_input",
            initial_response=None,
            args={
                "message": "Which model, and what is the budget?",
                "response_schema": {
                    "type": "object",
                    "properties": {"model": {"type": "string"}, "budget": {"type": "number"}},
                    "required": ["model"],
                },
            },
        )
    defaults.update(fields)
    return PendingCall.objects.create(**defaults)
