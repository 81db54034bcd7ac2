"""An agent used as a tool (ADK's AgentTool) cannot pause for a person: ADK runs it in a session of its
own, thrown away when it returns, so a pause of one of its tools never becomes a ticket. A long-running
tool's pending answer reaches its model, which tells the user a request is waiting for approval that no
approver will ever see (the demo's "I opened ticket approval-ticket-… with Sean Zhou"); a confirmation is
an error string. Such an agent cannot run: its turn fails saying why, and the admin who saves the
configuration is told, on the parent's page and on the page of the agent used as a tool."""

from __future__ import annotations

from django.test import Client

from agents_app import services
from agents_app.models import AgentConfig, AgentToolLink
from approvals.models import PendingCall
from tests.agents_app.test_config_history import _form
from tests.engine_scenarios import agent_texts, failed_turns, settle

WHY = "'reimbursement_agent' as a tool, and its tool ask_for_approval pauses for a person"


def _front(child: str) -> AgentConfig:
    front = AgentConfig.objects.create(name="front_agent", model="demo-offline", tools=[])
    AgentToolLink.objects.create(parent=front, child=AgentConfig.objects.get(name=child))
    return front


def test_a_request_for_approval_inside_an_agent_used_as_a_tool_is_not_promised_to_the_user(demo, worker, wait):
    _front("reimbursement_agent")
    session = services.session_create(app_name="front_agent", user_id="requester")
    services.message_send(session=session, text="Please reimburse 200$ for meals", actor=demo["requester"])
    settle(session, wait)
    assert not any("approval" in text for text in agent_texts(session)), agent_texts(session)
    assert not PendingCall.objects.filter(session=session).exists()
    ((_, error),) = failed_turns(session)
    assert WHY in error, error


def test_the_admin_is_told_on_the_parent_and_on_the_agent_used_as_a_tool(demo):
    admin = Client()
    admin.force_login(demo["admin"])
    front = _front("reimbursement_agent")
    page = admin.post(f"/admin/agents_app/agentconfig/{front.pk}/change/", _form(front), follow=True)
    shown = " ".join(str(m) for m in page.context["messages"])
    assert "cannot run yet" in shown and WHY in shown, shown

    # A tool that pauses given to an agent others use as a tool: those others cannot run any more.
    summary = AgentConfig.objects.get(name="summary_agent")
    page = admin.post(
        f"/admin/agents_app/agentconfig/{summary.pk}/change/", _form(summary, tools=["ask_for_approval"]), follow=True
    )
    shown = " ".join(str(m) for m in page.context["messages"])
    said = "'assistant_agent', which uses this agent as a tool, cannot run now"
    assert said in shown and "its tool ask_for_approval pauses for a person" in shown, shown


def test_which_tools_pause(monkeypatch):
    """Long-running tools and ADK's pause tools, and a confirmation asked every time; not a confirmation
    asked for some arguments only (it runs without a person for the others; for these ADK's AgentTool
    answers an error, the tool not run), nor an ordinary tool or a name not in the registry."""
    from agents_app.config_tools import pausing_tools
    from agents_app.demo.tools import transfer_money
    from agents_app.tools import RegisteredTool, registry

    big = RegisteredTool("big_transfer", transfer_money, False, lambda amount, **kw: amount > 1000)
    monkeypatch.setitem(registry._tools, "big_transfer", big)
    names = ["ask_for_approval", "adk_request_input", "get_user_choice", "transfer_money", "big_transfer"]
    config = AgentConfig(name="x", tools=[*names, "get_stock_price", "reimburse", "no_such_tool"])
    assert pausing_tools(config) == names[:4]
