"""Renaming an admin-configured agent. Its conversations are ADK sessions keyed by the agent's name (their
app_name), and so are its tickets, app and user state, artifacts and memory; a turn builds the agent of its
conversation's app_name when it runs. Before: the admin's change form took a new name while the agent had
conversations and open tickets: an approval then recorded (201) for the ticket, its turn failed ("No enabled
agent named 'reimbursement_agent'"), the approved reimbursement never ran, and every message in those
conversations failed the same way; and the approval policies that name it stopped applying to its tickets.
Now the rename is refused, as a form error on the name saying why, while the agent has a conversation that
is not deleted or a policy names it; an agent without either renames as before."""

from __future__ import annotations

import json

from django.test import Client

from agents_app import services
from agents_app.models import AgentConfig
from approvals.models import PendingCall, Policy
from tests.agents_app.test_config_history import _form
from tests.engine_scenarios import agent_texts, failed_turns, responses, settle, ticket_opened


def _admin(demo) -> Client:
    client = Client()
    client.force_login(demo["admin"])
    return client


def _rename(client: Client, old: str, new: str):
    config = AgentConfig.objects.get(name=old)
    return client.post(f"/admin/agents_app/agentconfig/{config.pk}/change/", _form(config, name=new), follow=True)


def _refused(page) -> str:
    assert page.status_code == 200, page.status_code
    if page.redirect_chain:
        return ""
    return " ".join(page.context["adminform"].form.errors.get("name", []))


def test_a_rename_while_a_ticket_waits_is_refused_and_the_approval_reaches_the_agent(demo, worker, wait):
    session = services.session_create(app_name="reimbursement_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse 300$ for a conference", actor=demo["requester"])
    ticket = ticket_opened(session, wait)

    refusal = _refused(_rename(_admin(demo), "reimbursement_agent", "expenses_agent"))

    assert "Not renamed" in refusal and "1 conversation" in refusal and f"#{ticket.pk}" in refusal, refusal
    assert AgentConfig.objects.filter(name="reimbursement_agent").exists()
    assert not AgentConfig.objects.filter(name="expenses_agent").exists()
    approver = Client()
    approver.force_login(demo["approver"])
    url = f"/api/pending-calls/{ticket.pk}/approve"
    assert approver.post(url, data=json.dumps({}), content_type="application/json").status_code == 201
    settle(session, wait)
    assert failed_turns(session) == []
    assert [r["response"]["amount"] for _, r in responses(session, "reimburse")] == [300.0]
    assert agent_texts(session)[-1] == "Done: I reimbursed $300.00 for a conference."


def test_a_rename_while_a_conversation_lives_is_refused(demo):
    """No ticket open: its next message would fail all the same."""
    services.session_create(app_name="stock_agent", user_id="requester")
    refusal = _refused(_rename(_admin(demo), "stock_agent", "prices_agent"))
    assert "Not renamed" in refusal and "1 conversation" in refusal, refusal
    assert not PendingCall.objects.exists()
    assert AgentConfig.objects.filter(name="stock_agent").exists()


def test_an_agent_whose_conversations_were_deleted_renames(demo):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    services.session_archive(session=session, actor=demo["admin"])
    assert _refused(_rename(_admin(demo), "stock_agent", "prices_agent")) == ""
    assert AgentConfig.objects.filter(name="prices_agent").exists()


def test_other_changes_of_an_agent_with_conversations_save(demo):
    services.session_create(app_name="stock_agent", user_id="requester")
    config = AgentConfig.objects.get(name="stock_agent")
    page = _admin(demo).post(
        f"/admin/agents_app/agentconfig/{config.pk}/change/", _form(config, description="Prices."), follow=True
    )
    assert _refused(page) == ""
    assert AgentConfig.objects.get(name="stock_agent").description == "Prices."


def test_a_rename_while_a_policy_names_the_agent_is_refused(demo):
    """No conversation, but the demo's "Treasury transfers" applies to transfer_agent by its name: renamed,
    its confirmations would open without treasury's rules (four-eyes, its group). Pointed at the new name
    first, the rename goes through."""
    admin = _admin(demo)
    refusal = _refused(_rename(admin, "transfer_agent", "payments_agent"))
    assert "Not renamed: the approval policies 'Treasury transfers' apply to this agent" in refusal, refusal
    assert AgentConfig.objects.filter(name="transfer_agent").exists()
    Policy.objects.filter(name="Treasury transfers").update(agent="payments_agent")
    assert _refused(_rename(admin, "transfer_agent", "payments_agent")) == ""
    assert AgentConfig.objects.filter(name="payments_agent").exists()
