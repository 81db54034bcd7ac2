"""Scenarios where an agent waits for a person: long-running tools, confirmations, input requests."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from agents_app import enqueue, services
from agents_app.models import StoredEvent, Turn
from approvals import services as approvals
from approvals.models import PendingCall, Response

from . import Wait, agent_texts, calls, failed_turns, responses, settle, ticket_opened


def _start(app: str, text: str, demo: dict) -> Any:
    session = services.session_create(app_name=app, user_id="requester")
    services.message_send(session=session, text=text, actor=demo["requester"])
    return session


def reimbursement_under_100_pays_without_a_ticket(demo: dict, wait: Wait) -> None:
    session = _start("reimbursement_agent", "Please reimburse 50$ for taxi", demo)
    settle(session, wait)
    assert failed_turns(session) == []
    assert not PendingCall.objects.filter(session=session).exists()
    assert [c["args"] for c in calls(session, "reimburse")] == [{"purpose": "taxi", "amount": 50.0}]
    assert agent_texts(session)[-1] == "Done: I reimbursed $50.00 for taxi."


def _reimbursement_ticket(demo: dict, wait: Wait) -> tuple[Any, PendingCall]:
    session = _start("reimbursement_agent", "Please reimburse 200$ for meals", demo)
    call = ticket_opened(session, wait)
    assert (call.kind, call.call_name, call.status) == ("long_running", "ask_for_approval", "pending")
    assert call.args == {"purpose": "meals", "amount": 200.0}
    ticket_id = call.initial_response["ticket-id"]
    assert ticket_id.startswith("approval-ticket-") and call.initial_response["status"] == "pending"
    assert ticket_id in agent_texts(session)[-1]
    assert calls(session, "reimburse") == []
    return session, call


def reimbursement_over_100_update_then_approval(demo: dict, wait: Wait) -> None:
    session, call = _reimbursement_ticket(demo, wait)
    approvals.ticket_update(ticket=call, actor=demo["approver"], message="Manager is reviewing", progress=40)
    settle(session, wait)
    call.refresh_from_db()
    assert call.status == PendingCall.Status.IN_PROGRESS
    assert agent_texts(session)[-1] == (
        "Update on your reimbursement of $200.00 for meals: Manager is reviewing (40% done). "
        "I'll tell you when it's decided."
    )
    assert calls(session, "reimburse") == []

    approvals.ticket_approve(ticket=call, actor=demo["approver"], comment="Fine")
    settle(session, wait)
    call.refresh_from_db()
    assert (call.status, call.closed_by) == (PendingCall.Status.APPROVED, demo["approver"])
    assert [c["args"] for c in calls(session, "reimburse")] == [{"purpose": "meals", "amount": 200.0}]
    assert agent_texts(session)[-1] == "Done: I reimbursed $200.00 for meals."
    assert failed_turns(session) == []
    # The agent saw every human answer as a user-authored response to the same call.
    sent = [(a, r["id"], r["response"]["status"]) for a, r in responses(session, "ask_for_approval") if a == "user"]
    assert sent == [("user", call.call_id, "in_progress"), ("user", call.call_id, "approved")]


def reimbursement_over_100_rejected_with_reason(demo: dict, wait: Wait) -> None:
    session, call = _reimbursement_ticket(demo, wait)
    approvals.ticket_reject(ticket=call, actor=demo["approver"], reason="No receipt attached")
    settle(session, wait)
    call.refresh_from_db()
    assert call.status == PendingCall.Status.REJECTED
    assert (
        agent_texts(session)[-1] == "Sorry, your reimbursement of $200.00 for meals was rejected: No receipt attached"
    )
    assert calls(session, "reimburse") == []


def second_final_response_is_refused_and_reaches_nobody(demo: dict, wait: Wait) -> None:
    session, call = _reimbursement_ticket(demo, wait)
    approvals.ticket_approve(ticket=call, actor=demo["approver"])
    settle(session, wait)
    turns, events = Turn.objects.filter(session=session).count(), StoredEvent.objects.filter(session=session).count()
    with pytest.raises(approvals.TicketClosed, match="already closed"):
        approvals.ticket_reject(ticket=call, actor=demo["admin"], reason="Changed my mind")
    with pytest.raises(approvals.TicketClosed):
        approvals.ticket_update(ticket=call, actor=demo["approver"], message="late news")
    enqueue.owed_sessions_enqueue()  # even a sweep finds nothing owed
    settle(session, wait)
    assert Turn.objects.filter(session=session).count() == turns
    assert StoredEvent.objects.filter(session=session).count() == events
    call.refresh_from_db()
    assert call.status == PendingCall.Status.APPROVED
    assert list(Response.objects.filter(pending_call=call).values_list("action", flat=True)) == ["approve"]
    assert agent_texts(session)[-1] == "Done: I reimbursed $200.00 for meals."


def racing_final_responses_one_wins(demo: dict, wait: Wait) -> None:
    session, call = _reimbursement_ticket(demo, wait)
    turns = Turn.objects.filter(session=session).count()
    barrier = threading.Barrier(2)
    outcomes: dict[str, Any] = {}

    def answer(action: str) -> None:
        try:
            barrier.wait(timeout=10)
            if action == "approve":
                approvals.ticket_approve(ticket=call, actor=demo["approver"])
            else:
                approvals.ticket_reject(ticket=call, actor=demo["admin"], reason="Too much")
            outcomes[action] = "won"
        except approvals.TicketClosed as exc:
            outcomes[action] = exc
        except Exception as exc:  # anything else is a bug the assertion below shows
            outcomes[action] = repr(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=answer, args=(a,)) for a in ("approve", "reject")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(type(v).__name__ for v in outcomes.values()) == ["TicketClosed", "str"], outcomes
    winner = next(a for a, v in outcomes.items() if v == "won")
    settle(session, wait)
    call.refresh_from_db()
    assert call.status == {"approve": "approved", "reject": "rejected"}[winner]
    assert Response.objects.filter(pending_call=call).count() == 1
    assert Turn.objects.filter(session=session).count() == turns + 1
    expected = "Done: I reimbursed" if winner == "approve" else "was rejected: Too much"
    assert expected in agent_texts(session)[-1]


def ticket_agent_three_turns(demo: dict, wait: Wait) -> None:
    session = _start("ticket_agent", "Create a high urgency ticket for me.", demo)
    call = ticket_opened(session, wait)
    assert (call.call_name, call.args) == ("create_ticket_long_running", {"urgency": "high"})
    ticket = call.initial_response["ticket_id"]
    assert (
        agent_texts(session)[-1]
        == f"I'm creating a high urgency ticket: {ticket} (status: started). I'll report back when it changes."
    )

    approvals.response_submit(
        ticket=call, actor=demo["approver"], final=False, payload={"status": "started", "ticket_id": ticket}
    )
    settle(session, wait)
    call.refresh_from_db()
    assert call.status == PendingCall.Status.IN_PROGRESS
    assert ticket in agent_texts(session)[-1] and "status: started" in agent_texts(session)[-1]

    approvals.response_submit(
        ticket=call, actor=demo["approver"], final=True, payload={"status": "approved", "ticket_id": ticket}
    )
    settle(session, wait)
    call.refresh_from_db()
    assert call.status == PendingCall.Status.APPROVED
    assert agent_texts(session)[-1] == f"Ticket {ticket} is now approved."
    assert Turn.objects.filter(session=session, status=Turn.Status.DONE).count() == 3


def confirmation_approved_runs_the_tool(demo: dict, wait: Wait) -> None:
    session = _start("transfer_agent", "Please transfer $500 to Bob", demo)
    call = ticket_opened(session, wait)
    assert (call.kind, call.call_name, call.tool_name) == ("confirmation", "adk_request_confirmation", "transfer_money")
    assert call.original_call["args"] == {"amount": 500.0, "recipient": "Bob"}
    assert responses(session, "transfer_money") and all(
        r["response"].get("error") for _, r in responses(session, "transfer_money")
    )
    approvals.ticket_approve(ticket=call, actor=demo["approver"])
    settle(session, wait)
    call.refresh_from_db()
    assert call.status == PendingCall.Status.APPROVED
    result = responses(session, "transfer_money")[-1][1]["response"]
    assert result["status"] == "transferred" and result["transfer-id"].startswith("TR-")
    assert agent_texts(session)[-1] == f"Transferred $500.00 to Bob (transfer {result['transfer-id']})."


def confirmation_denied_says_why(demo: dict, wait: Wait) -> None:
    session = _start("transfer_agent", "Please transfer $500 to Bob", demo)
    call = ticket_opened(session, wait)
    approvals.ticket_reject(ticket=call, actor=demo["approver"], reason="Bob is not a vendor")
    settle(session, wait)
    call.refresh_from_db()
    assert call.status == PendingCall.Status.REJECTED
    assert all(r["response"].get("status") != "transferred" for _, r in responses(session, "transfer_money"))
    reply = agent_texts(session)[-1]
    assert reply.startswith("The transfer of $500.00 to Bob was not made") and "Bob is not a vendor" in reply


def input_request_checks_the_schema(demo: dict, wait: Wait) -> None:
    session = _start("intake_agent", "a new laptop", demo)
    call = ticket_opened(session, wait)
    assert call.kind == PendingCall.Kind.INPUT and call.response_schema["required"] == ["model"]
    turns, events = Turn.objects.filter(session=session).count(), StoredEvent.objects.filter(session=session).count()
    with pytest.raises(approvals.InvalidResponse, match="schema"):
        approvals.response_submit(ticket=call, actor=demo["requester"], final=True, payload={"budget": "lots"})
    assert (Turn.objects.filter(session=session).count(), StoredEvent.objects.filter(session=session).count()) == (
        turns,
        events,
    )
    assert not Response.objects.filter(pending_call=call).exists()
    call.refresh_from_db()
    assert call.status == PendingCall.Status.PENDING

    approvals.response_submit(ticket=call, actor=demo["requester"], final=True, payload={"model": "X1", "budget": 1500})
    settle(session, wait)
    call.refresh_from_db()
    assert call.status == PendingCall.Status.ANSWERED and failed_turns(session) == []
    assert agent_texts(session)[-1] == 'Thanks, noted: {"budget": 1500, "model": "X1"}.'
