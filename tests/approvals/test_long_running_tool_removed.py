"""A long-running tool's ticket whose tool an admin took out of its agent while it waited (not a
confirmation's: adb0f83, ToolGone). ADK 2.13 resumes such an answer without the tool: the user-authored
FunctionResponse continues the call's invocation found by its id in the stored events, and the resume
step (flows/llm_flows/core/_resume.py: `_find_target_call_event` looks only for calls of tools the agent
has) finds no call of its own to run or wait for, so the model is called with the call and its answer in
its history, as with the tool there. Nothing runs the long-running tool again (its answer is the user's).
Unlike a confirmation's (ADK's `_resolve_confirmation_targets` needs the tool: "Tool ... is not
registered"), so these answers are taken, and their actions run once. Pinned here on the embedded worker:
approve, reject, an update then the approval, and the expiry."""

from __future__ import annotations

import json
from datetime import timedelta

from django.test import Client
from django.utils import timezone

from agents_app import services
from agents_app.config_history import agent_config_record
from agents_app.models import AgentConfig
from approvals.deadlines import deadlines_sweep
from approvals.models import PendingCall
from tests.engine_scenarios import agent_texts, failed_turns, responses, settle, ticket_opened


def _ticket_then_tool_taken_out(demo, wait) -> PendingCall:
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse 300$ for a conference", actor=demo["requester"])
    ticket = ticket_opened(session, wait)
    assert (ticket.kind, ticket.tool_name) == ("long_running", "ask_for_approval")
    config = AgentConfig.objects.get(name="reimbursement_agent")
    config.tools = ["reimburse"]  # ask_for_approval taken out, as the admin's save does
    config.save()
    agent_config_record(config=config, actor=demo["admin"])
    return ticket


def _post(demo, ticket: PendingCall, path: str, body: dict) -> int:
    client = Client()
    client.force_login(demo["approver"])
    url = f"/api/pending-calls/{ticket.pk}/{path}"
    return client.post(url, data=json.dumps(body), content_type="application/json").status_code


def _reimbursed(ticket: PendingCall) -> list[float]:
    return [r["response"]["amount"] for _, r in responses(ticket.session, "reimburse")]


def test_an_approval_reaches_the_agent_and_its_action_runs_once(demo, worker, wait):
    ticket = _ticket_then_tool_taken_out(demo, wait)
    assert _post(demo, ticket, "approve", {}) == 201
    settle(ticket.session, wait)
    assert failed_turns(ticket.session) == []
    assert _reimbursed(ticket) == [300.0]
    assert agent_texts(ticket.session)[-1] == "Done: I reimbursed $300.00 for a conference."
    ticket.refresh_from_db()
    assert ticket.status == "approved"


def test_a_rejection_reaches_the_agent(demo, worker, wait):
    ticket = _ticket_then_tool_taken_out(demo, wait)
    assert _post(demo, ticket, "reject", {"reason": "no"}) == 201
    settle(ticket.session, wait)
    assert failed_turns(ticket.session) == [] and _reimbursed(ticket) == []
    assert agent_texts(ticket.session)[-1] == "Sorry, your reimbursement of $300.00 for a conference was rejected: no"


def test_an_update_then_the_approval_each_reach_the_agent(demo, worker, wait):
    ticket = _ticket_then_tool_taken_out(demo, wait)
    update = {"response": {"status": "pending", "message": "looking at it"}, "final": False}
    assert _post(demo, ticket, "responses", update) == 201
    settle(ticket.session, wait)
    replies = len(agent_texts(ticket.session))
    assert failed_turns(ticket.session) == [] and replies == 2
    assert _post(demo, ticket, "approve", {}) == 201
    settle(ticket.session, wait)
    assert failed_turns(ticket.session) == [] and _reimbursed(ticket) == [300.0]


def test_its_expiry_reaches_the_agent(demo, worker, wait):
    ticket = _ticket_then_tool_taken_out(demo, wait)
    PendingCall.objects.filter(pk=ticket.pk).update(due_at=timezone.now() - timedelta(seconds=1))
    assert deadlines_sweep()["expired"] == 1
    settle(ticket.session, wait)
    assert failed_turns(ticket.session) == [] and _reimbursed(ticket) == []
    said = "Sorry, your reimbursement request of $300.00 for a conference expired: nobody decided it in time."
    assert agent_texts(ticket.session)[-1] == said
