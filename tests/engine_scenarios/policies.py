"""Approval policies end to end, with the agent running: 2 of N, four-eyes, auto-approve, escalation
then expiry (the agent is told), a standing grant approving the next ticket at once, edits reaching
the tool, and approvers racing for the last approval. The demo's policies are loaded (`demo`)."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection

from agents_app import services
from agents_app.models import Turn
from approvals import grants
from approvals import services as approvals
from approvals.models import PendingCall, Policy, Response, StandingGrant

from . import Wait, agent_texts, calls, responses, settle, ticket_opened


def _start(app: str, text: str, user: User, session: Any = None) -> Any:
    session = session or services.session_create(app_name=app, user_id=user.get_username())
    services.message_send(session=session, text=text, actor=user)
    return session


def _newest_ticket(session: Any, wait: Wait) -> PendingCall:
    settle(session, wait, "the turn that opens a ticket")
    return PendingCall.objects.filter(session=session).latest("pk")


def two_of_n_approvals_then_the_agent_resumes(demo: dict, wait: Wait) -> None:
    session = _start("reimbursement_agent", "Please reimburse 2500$ for laptop", demo["requester"])
    ticket = ticket_opened(session, wait)
    assert (ticket.policy_name, ticket.required_approvals, ticket.routed) == ("Large reimbursements", 2, True)
    turns = Turn.objects.filter(session=session).count()
    first = approvals.ticket_approve(ticket=ticket, actor=demo["approver"])
    settle(session, wait)
    assert not first.final and Turn.objects.filter(session=session).count() == turns  # nothing reached the agent
    assert calls(session, "reimburse") == []
    approvals.ticket_approve(ticket=ticket, actor=demo["approver2"])
    settle(session, wait)
    ticket.refresh_from_db()
    assert (ticket.status, ticket.closed_by) == ("approved", demo["approver2"])
    assert [c["args"] for c in calls(session, "reimburse")] == [{"purpose": "laptop", "amount": 2500.0}]
    assert agent_texts(session)[-1] == "Done: I reimbursed $2,500.00 for laptop."
    sent = [r["response"]["status"] for a, r in responses(session, "ask_for_approval") if a == "user"]
    assert sent == ["approved"]  # one answer reached the agent, after the second approval


def four_eyes_keeps_the_requester_off_their_own_transfer(demo: dict, wait: Wait) -> None:
    session = _start("transfer_agent", "Please transfer $500 to Bob", demo["approver"])
    ticket = ticket_opened(session, wait)
    assert (ticket.policy_name, ticket.four_eyes, ticket.kind) == ("Treasury transfers", True, "confirmation")
    with pytest.raises(approvals.NotAllowed, match="four-eyes"):
        approvals.ticket_approve(ticket=ticket, actor=demo["approver"])
    with pytest.raises(approvals.NotAllowed, match="only members of treasury"):
        approvals.ticket_approve(ticket=ticket, actor=demo["approver2"])
    assert not Response.objects.filter(pending_call=ticket).exists()
    approvals.ticket_approve(ticket=ticket, actor=demo["admin"])
    settle(session, wait)
    result = responses(session, "transfer_money")[-1][1]["response"]
    assert result["status"] == "transferred"
    assert agent_texts(session)[-1] == f"Transferred $500.00 to Bob (transfer {result['transfer-id']})."


def auto_approve_resumes_the_agent_with_no_person(demo: dict, wait: Wait) -> None:
    Policy.objects.create(
        name="Small stuff", tool="ask_for_approval", condition="amount < 300", auto_decision="approve"
    )
    session = _start("reimbursement_agent", "Please reimburse 250$ for books", demo["requester"])
    settle(session, wait)
    ticket = PendingCall.objects.get(session=session)
    assert ticket.status == "approved" and ticket.closed_by is None
    assert Response.objects.get(pending_call=ticket).source == "policy"
    assert agent_texts(session)[-1] == "Done: I reimbursed $250.00 for books."


def escalation_then_expiry_and_the_agent_is_told(demo: dict, wait: Wait) -> None:
    ops = Group.objects.create(name="ops")
    olga = User.objects.create_user("olga", password="pw-olga-1")
    olga.groups.add(ops)
    policy = Policy.objects.create(
        name="Quick", tool="ask_for_approval", due_in_seconds=8, escalate_after_seconds=2, priority=10
    )
    policy.approver_groups.set([Group.objects.get(name="finance")])
    policy.escalation_groups.set([ops])
    session = _start("reimbursement_agent", "Please reimburse 200$ for meals", demo["requester"])
    ticket = ticket_opened(session, wait)
    from approvals.permissions import can_decide_ticket

    assert not can_decide_ticket(olga, ticket)
    assert (ticket.policy_name, ticket.escalate_at - ticket.created_at) == ("Quick", timedelta(seconds=2))
    wait(lambda: PendingCall.objects.get(pk=ticket.pk).escalated_at, timeout=30, what="the escalation")
    ticket.refresh_from_db()
    assert ticket.is_open and can_decide_ticket(olga, ticket)
    wait(lambda: PendingCall.objects.get(pk=ticket.pk).status == "expired", timeout=30, what="the expiry")
    settle(session, wait)
    assert (
        agent_texts(session)[-1]
        == "Sorry, your reimbursement request of $200.00 for meals expired: nobody decided it in time."
    )
    told = [r["response"] for a, r in responses(session, "ask_for_approval") if a == "user"]
    assert len(told) == 1 and told[0]["status"] == "expired"
    with pytest.raises(approvals.TicketClosed, match="expired"):
        approvals.ticket_approve(ticket=ticket, actor=olga)
    kinds = list(ticket.activities.values_list("kind", flat=True))
    assert kinds == ["policy", "escalated", "expired"]


def standing_grant_approves_the_next_ticket_at_once(demo: dict, wait: Wait) -> None:
    session = _start("reimbursement_agent", "Please reimburse 200$ for meals", demo["requester"])
    first = ticket_opened(session, wait)
    approvals.ticket_approve(ticket=first, actor=demo["approver"], grant=grants.GrantSpec("session", 30))
    settle(session, wait)
    grant = StandingGrant.objects.get(ticket=first)
    _start("reimbursement_agent", "Please reimburse 300$ for taxi", demo["requester"], session=session)
    second = _newest_ticket(session, wait)
    assert second.pk != first.pk and second.status == "approved"
    assert Response.objects.get(pending_call=second).grant == grant
    assert agent_texts(session)[-1] == "Done: I reimbursed $300.00 for taxi."


def edits_reach_the_tool(demo: dict, wait: Wait) -> None:
    session = _start("reimbursement_agent", "Please reimburse 200$ for meals", demo["requester"])
    ticket = ticket_opened(session, wait)
    approvals.ticket_approve(
        ticket=ticket, actor=demo["approver"], edited_args={"purpose": "team meals", "amount": 150}
    )
    settle(session, wait)
    assert [c["args"] for c in calls(session, "reimburse")] == [{"purpose": "team meals", "amount": 150}]
    assert agent_texts(session)[-1] == "Done: I reimbursed $150.00 for team meals."
    transfer = _start("transfer_agent", "Please transfer $500 to Bob", demo["requester"])
    confirm = ticket_opened(transfer, wait)
    approvals.ticket_approve(ticket=confirm, actor=demo["approver"], edited_args={"amount": 450, "recipient": "Bob"})
    settle(transfer, wait)
    result = responses(transfer, "transfer_money")[-1][1]["response"]
    assert (result["status"], result["amount"]) == ("transferred", 450)
    assert agent_texts(transfer)[-1].startswith("Transferred $450.00 to Bob")


def racing_for_the_last_approval_closes_once(demo: dict, wait: Wait) -> None:
    session = _start("reimbursement_agent", "Please reimburse 2500$ for laptop", demo["requester"])
    ticket = ticket_opened(session, wait)
    approvals.ticket_approve(ticket=ticket, actor=demo["admin"])
    turns = Turn.objects.filter(session=session).count()
    barrier = threading.Barrier(2)
    outcomes: dict[str, Any] = {}

    def approve(who: str) -> None:
        try:
            barrier.wait(timeout=10)
            outcomes[who] = approvals.ticket_approve(ticket=ticket, actor=demo[who]).final
        except approvals.TicketClosed as exc:
            outcomes[who] = exc
        except Exception as exc:  # anything else is a bug the assertion shows
            outcomes[who] = repr(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=approve, args=(who,)) for who in ("approver", "approver2")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert sorted(type(v).__name__ for v in outcomes.values()) == ["TicketClosed", "bool"], outcomes
    assert True in outcomes.values()
    settle(session, wait)
    ticket.refresh_from_db()
    assert ticket.status == "approved"
    assert Response.objects.filter(pending_call=ticket, final=True).count() == 1
    assert Turn.objects.filter(session=session).count() == turns + 1
    assert len(calls(session, "reimburse")) == 1
