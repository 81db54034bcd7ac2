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
    # A confirmation's agent has its tool (transfer_money): a person's answer needs it (decision_plan.ToolGone).
    session = session or session_for(app_name="transfer_agent" if kind == "confirmation" else "reimbursement_agent")
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


def turn_event(turn: Any) -> Any:
    """An event of the turn's run (a ticket's `event`: the turn that opened it)."""
    from agents_app.models import StoredEvent

    return StoredEvent.objects.create(
        session=turn.session, event_id=f"ev-{turn.pk}", author="agent", timestamp=0.0, data={}, turn=turn
    )


def stamped(ticket: PendingCall, at: Any) -> PendingCall:
    """The ticket with its created_at set to `at` (a worker's clock that disagrees with the web's)."""
    PendingCall.objects.filter(pk=ticket.pk).update(created_at=at)
    return PendingCall.objects.get(pk=ticket.pk)


def asks(user: Any, session: Any) -> Any:
    """A message of theirs in the conversation (staff write in other people's: four-eyes' askers), as
    /run or the page queues one, no agent run: its Turn."""
    from django.db import transaction
    from google.genai import types

    content = types.Content(role="user", parts=[types.Part(text="please")])
    with transaction.atomic():
        return agent_services.turn_add(session=session, content=content, actor=user, enqueue=False)


def staff(username: str, *groups: str) -> Any:
    """A staff member (who reads and writes every conversation) in these groups, permissions fresh."""
    from django.contrib.auth.models import Group, User

    user = User.objects.create_user(username, password="x", is_staff=True)
    user.groups.add(*Group.objects.filter(name__in=groups))
    return User.objects.get(pk=user.pk)
