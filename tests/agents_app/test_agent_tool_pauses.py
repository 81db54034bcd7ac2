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


def _asked_for_approval(app_name: str, demo: dict, wait) -> str:
    """Ask `app_name` for a reimbursement that needs an approval: no ticket, no promise of one, a failed
    turn; its error."""
    session = services.session_create(app_name=app_name, user_id="requester")
    services.message_send(session=session, text="Please reimburse 200$ for meals", actor=demo["requester"])
    settle(session, wait)
    assert not any("approval" in text for text in agent_texts(session)), agent_texts(session)
    assert not PendingCall.objects.filter(session=session).exists()
    ((_, error),) = failed_turns(session)
    return error


def test_a_request_for_approval_inside_an_agent_used_as_a_tool_is_not_promised_to_the_user(demo, worker, wait):
    _front("reimbursement_agent")
    error = _asked_for_approval("front_agent", demo, wait)
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


# Code-defined agents (ADKWEB_CODE_AGENTS, ADKWEB_AGENTS_DIR) are refused as they are built, with the same words.
def _code_agents() -> dict:
    from google.adk.agents import LlmAgent
    from google.adk.tools import FunctionTool
    from google.adk.tools.agent_tool import AgentTool

    from agents_app.demo.model import DemoLlm
    from agents_app.demo.tools import reimburse, transfer_money
    from agents_app.tools import registry

    def agent(name: str, tools: list, **kw) -> LlmAgent:
        return LlmAgent(name=name, model=DemoLlm(model="demo-offline"), tools=tools, **kw)

    asker = agent("asker", [registry.get("ask_for_approval").build(), registry.get("reimburse").build()])
    confirming = agent("confirming", [FunctionTool(transfer_money, require_confirmation=True)])
    sometimes = agent("sometimes", [FunctionTool(transfer_money, require_confirmation=lambda amount, **kw: amount > 1)])
    deep = agent("deep", [reimburse], sub_agents=[agent("deep_sub", [registry.get("ask_for_approval").build()])])
    return {
        "code_front": agent("code_front", [AgentTool(agent=asker)]),
        "code_confirm": agent("code_confirm", [AgentTool(agent=confirming)]),
        "code_deep": agent("code_deep", [], sub_agents=[agent("helper", [AgentTool(agent=deep)])]),
        "code_sometimes": agent("code_sometimes", [AgentTool(agent=sometimes)]),
        "code_own": agent("code_own", [registry.get("ask_for_approval").build(), AgentTool(agent=agent("plain", []))]),
    }


CODE_AGENTS = _code_agents()
globals().update(CODE_AGENTS)  # importable by dotted path, as ADKWEB_CODE_AGENTS names them


def test_a_code_defined_agent_using_a_pausing_agent_as_a_tool_does_not_run_and_says_why(demo, worker, wait, settings):
    settings.ADKWEB_CODE_AGENTS = {name: f"{__name__}.{name}" for name in CODE_AGENTS}
    error = _asked_for_approval("code_front", demo, wait)
    why = "Agent 'code_front' uses 'asker' as a tool, and its tool ask_for_approval pauses for a person"
    assert why in error, error
    # The Agents page says so on the agent's card (a code-defined agent has no admin page to save).
    page = Client()
    page.force_login(demo["admin"])
    assert why.replace("'", "&#x27;") in page.get("/agents/").content.decode()


def test_which_code_defined_agents_are_refused(settings):
    import pytest

    from agents_app import agents

    settings.ADKWEB_CODE_AGENTS = {name: f"{__name__}.{name}" for name in CODE_AGENTS}
    refused = {
        "code_confirm": "'code_confirm' uses 'confirming' as a tool, and its tool transfer_money pauses",
        "code_deep": "'helper' uses 'deep' as a tool, and its tool ask_for_approval (of 'deep_sub') pauses",
    }
    for name, why in refused.items():
        with pytest.raises(agents.AgentConfigError, match=why.replace("(", r"\(").replace(")", r"\)")):
            agents.build_app(name)
    # A confirmation for some arguments only, and a pausing tool of the agent's own: they run.
    assert agents.build_app("code_sometimes").root_agent is CODE_AGENTS["code_sometimes"]
    assert agents.build_app("code_own").root_agent is CODE_AGENTS["code_own"]
