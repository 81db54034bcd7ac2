"""A confirmation whose tool its agent no longer has (an admin took the tool out of the agent while the
ticket waited): ADK cannot run or refuse that call any more (its confirmation step fails the turn with
"Tool ... is not registered"). An approval was recorded and answered 200 all the same: the ticket said
approved, the transfer never ran, and the failed turn could not be retried (it had stored the answer).
Now every person's answer to it is refused (409, nothing changed, nothing sent) while the tool is gone,
and once the tool is back the approval runs it, once. Its expiry closes it without sending the agent
anything (where it failed the agent's turn), its record saying why. The admin who takes the tool out is
told which confirmations wait for it."""

from __future__ import annotations

import json
from datetime import timedelta

from django.test import Client
from django.utils import timezone

from agents_app import services
from agents_app.config_history import agent_config_record
from agents_app.models import AgentConfig, AgentToolLink, Turn
from approvals.deadlines import deadlines_sweep
from approvals.models import PendingCall, Response
from tests.agents_app.test_config_history import _form
from tests.engine_scenarios import agent_texts, failed_turns, responses, settle, ticket_opened


def _tools(demo, tools: list[str]) -> None:
    config = AgentConfig.objects.get(name="transfer_agent")
    config.tools = tools
    config.save()
    agent_config_record(config=config, actor=demo["admin"])  # as the admin's save records it


def _post(client: Client, ticket: PendingCall, action: str, body: dict) -> tuple[int, str]:
    r = client.post(f"/api/pending-calls/{ticket.pk}/{action}", data=json.dumps(body), content_type="application/json")
    return r.status_code, r.json().get("detail", "")


def _transfer_ticket(demo, wait) -> PendingCall:
    session = services.session_create(app_name="transfer_agent", user_id="requester")
    services.message_send(session=session, text="Please transfer $500 to Bob", actor=demo["requester"])
    return ticket_opened(session, wait)


def test_a_confirmation_whose_tool_was_taken_out_of_its_agent_is_refused_until_it_is_back(demo, worker, wait):
    ticket = _transfer_ticket(demo, wait)
    session = ticket.session
    assert ticket.kind == "confirmation" and ticket.tool_name == "transfer_money"
    _tools(demo, [])
    client = Client()
    client.force_login(demo["approver"])
    turns = Turn.objects.filter(session=session).count()

    for action, body in (("approve", {}), ("reject", {"reason": "no"})):
        status, detail = _post(client, ticket, action, body)
        assert status == 409, (action, status, detail)
        assert "no longer has the tool 'transfer_money'" in detail and detail.endswith("Nothing was sent."), detail
    ticket.refresh_from_db()
    assert ticket.status == "pending" and not Response.objects.filter(pending_call=ticket).exists()
    assert Turn.objects.filter(session=session).count() == turns and failed_turns(session) == []

    _tools(demo, ["transfer_money"])
    assert _post(client, ticket, "approve", {})[0] == 201
    settle(session, wait)
    assert failed_turns(session) == []
    done = [r["response"] for _, r in responses(session, "transfer_money") if "status" in r["response"]]
    assert [(r["status"], r["amount"], r["recipient"]) for r in done] == [("transferred", 500.0, "Bob")]
    assert agent_texts(session)[-1].startswith("Transferred $500.00 to Bob")


def test_its_expiry_closes_it_and_sends_the_agent_nothing(demo, worker, wait):
    ticket = _transfer_ticket(demo, wait)
    PendingCall.objects.filter(pk=ticket.pk).update(due_at=timezone.now() - timedelta(seconds=1))
    _tools(demo, [])
    turns = Turn.objects.filter(session=ticket.session).count()
    assert deadlines_sweep()["expired"] == 1
    settle(ticket.session, wait)
    ticket.refresh_from_db()
    assert ticket.status == "expired"
    assert Turn.objects.filter(session=ticket.session).count() == turns and failed_turns(ticket.session) == []
    (row,) = Response.objects.filter(pending_call=ticket)
    assert (row.action, row.final, row.turn_id) == ("expire", True, None)
    assert row.comment.endswith("Not sent: agent 'transfer_agent' no longer has the tool 'transfer_money'.")


def test_the_admin_who_takes_the_tool_out_is_told_which_confirmations_wait_for_it(demo, worker, wait):
    ticket = _transfer_ticket(demo, wait)
    admin = Client()
    admin.force_login(demo["admin"])
    config = AgentConfig.objects.get(name="transfer_agent")
    page = admin.post(f"/admin/agents_app/agentconfig/{config.pk}/change/", _form(config, tools=[]), follow=True)
    shown = [str(m) for m in page.context["messages"]]
    said = "confirmations wait for tools this agent no longer has: transfer_money (1)."
    assert page.status_code == 200 and any(said in m for m in shown), shown
    approver = Client()
    approver.force_login(demo["approver"])
    assert _post(approver, ticket, "approve", {})[0] == 409


def test_a_tool_moved_into_an_agent_it_uses_as_a_tool_is_gone_for_its_confirmation(demo, worker, wait):
    """ADK answers a confirmation with the confirming agent's own tools only: an agent used as a tool
    (AgentTool) runs in a session of its own, its tools are not its parent's. The admin moved
    transfer_money out of transfer_agent into an agent transfer_agent uses as a tool: the waiting
    confirmation can reach no tool, so it is refused as if the tool were gone (before: 201, the ticket
    approved, the agent's turn failed with "Tool 'transfer_money' is not registered", no transfer)."""
    ticket = _transfer_ticket(demo, wait)
    session = ticket.session
    payer = AgentConfig.objects.create(name="payer_agent", model="demo", tools=["transfer_money"])
    AgentToolLink.objects.create(parent=AgentConfig.objects.get(name="transfer_agent"), child=payer)
    _tools(demo, [])
    client = Client()
    client.force_login(demo["approver"])
    turns = Turn.objects.filter(session=session).count()

    status, detail = _post(client, ticket, "approve", {})
    assert status == 409, (status, detail)
    assert "no longer has the tool 'transfer_money'" in detail, detail
    ticket.refresh_from_db()
    assert ticket.status == "pending" and not Response.objects.filter(pending_call=ticket).exists()
    assert Turn.objects.filter(session=session).count() == turns and failed_turns(session) == []
