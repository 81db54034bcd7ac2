"""Whether an admin-configured agent still has the tool a confirmation waits for (agents_app.config_tools):
a tool registered under another name than its function's is the agent's by either name (ADK names the
call after the function; the agent's configuration lists the registry's name)."""

from __future__ import annotations

from agents_app.config_tools import configured_without_tool
from agents_app.demo.tools import transfer_money
from agents_app.models import AgentConfig
from agents_app.tools import RegisteredTool, registry


def test_a_tool_registered_under_another_name_is_the_agents_by_its_function_name(db, monkeypatch):
    monkeypatch.setitem(registry._tools, "pay_out", RegisteredTool("pay_out", transfer_money, False, True))
    AgentConfig.objects.create(name="payout_agent", tools=["pay_out"])
    assert not configured_without_tool("payout_agent", "transfer_money")  # the call's name: the function's
    assert not configured_without_tool("payout_agent", "pay_out")
    assert configured_without_tool("payout_agent", "reimburse")
    assert not configured_without_tool("no_such_agent", "reimburse")  # no agent here: its run says why
