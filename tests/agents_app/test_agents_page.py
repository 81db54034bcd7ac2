"""The agents page: every agent with its model, instruction, tools and their declarations."""

from __future__ import annotations

import html as html_lib

from django.test import Client

from agents_app.demo.model import DEMO_LABEL
from agents_app.models import AgentConfig


def _get(user) -> str:
    c = Client()
    c.force_login(user)
    r = c.get("/agents/")
    assert r.status_code == 200
    return r.content.decode()


def test_agents_page_shows_every_configured_agent_with_model_and_instruction(demo):
    page = _get(demo["requester"])
    assert "<title>Agents · adkweb</title>" in page
    for name in AgentConfig.objects.values_list("name", flat=True):
        assert f'id="agent-{name}"' in page
    assert DEMO_LABEL in page
    assert "If the amount is less than $100, you will automatically approve" in page


def test_tool_declarations_are_readable_with_raw_json_one_click_away(demo):
    page = _get(demo["requester"])
    tool = page.split('id="agent-reimbursement_agent-tool-ask_for_approval"')[1].split('id="agent-')[0]
    assert "long-running: waits for a human" in tool
    assert "Ask for approval for the reimbursement." in tool
    assert "NOTE: This is a long-running operation." in tool  # ADK's addition: what the model really sees
    assert "<code>purpose</code>" in tool and "<code>amount</code>" in tool and "required" in tool
    assert "<details><summary>Declaration as the model sees it (JSON)</summary>" in tool
    assert "&quot;name&quot;: &quot;ask_for_approval&quot;" in tool
    transfer = page.split('id="agent-transfer_agent-tool-transfer_money"')[1].split('id="agent-')[0]
    assert "needs a person's confirmation" in transfer


def test_agents_used_as_tools_are_shown_with_skip_summarization(demo):
    page = _get(demo["requester"])
    assistant = page.split('id="agent-assistant_agent"')[1].split("</section>")[0]
    assert "Agents used as tools" in assistant and 'href="#agent-summary_agent"' in assistant
    assert "skip_summarization" in assistant


def test_edit_links_only_for_agent_admins(demo):
    config = AgentConfig.objects.get(name="stock_agent")
    admin_page = _get(demo["admin"])
    assert f'href="/admin/agents_app/agentconfig/{config.pk}/change/"' in admin_page
    assert 'href="/admin/agents_app/agentconfig/add/"' in admin_page
    for who in ("requester", "approver", "observer"):
        page = _get(demo[who])
        assert "/admin/agents_app/agentconfig/" not in page, who


def test_disabled_and_broken_agents_are_shown_plainly_and_escaped(demo):
    AgentConfig.objects.create(
        name="broken_agent",
        enabled=False,
        tools=["no_such_tool"],
        instruction="<b>bold</b> & co",
        model="gemini-2.5-flash",
    )
    page = _get(demo["requester"])
    broken = page.split('id="agent-broken_agent"')[1].split("</section>")[0]
    assert "disabled" in broken and "unknown tool" in broken and "No tool named" in broken
    assert html_lib.escape("<b>bold</b> & co") in broken and "<b>bold</b>" not in broken
    assert "gemini-2.5-flash" in broken and DEMO_LABEL not in broken
    assert "Start a conversation" not in broken


def test_code_defined_agents_are_listed(demo, settings):
    settings.ADKWEB_CODE_AGENTS = {"code_agent": "tests.agents_app.test_agents_page.CODE_AGENT"}
    page = _get(demo["requester"])
    code = page.split('id="agent-code_agent"')[1].split("</section>")[0]
    assert "defined in code" in code and "Instruction from code." in code
    assert 'id="agent-code_agent-tool-lookup"' in code and "Look a word up." in code
    assert 'href="#agent-helper"' in code


def lookup(word: str) -> dict:
    """Look a word up."""
    return {"word": word}


def _code_agent():
    from google.adk.agents import LlmAgent
    from google.adk.tools import FunctionTool
    from google.adk.tools.agent_tool import AgentTool

    helper = LlmAgent(name="helper", model="demo-offline", instruction="help")
    return LlmAgent(
        name="code_agent",
        model="demo-offline",
        instruction="Instruction from code.",
        tools=[FunctionTool(func=lookup), AgentTool(agent=helper)],
    )


def __getattr__(name: str):
    if name == "CODE_AGENT":
        return _code_agent()
    raise AttributeError(name)


def test_menus_read_configured_agents_and_remote_apps_in_one_query(demo):
    """The filter menus (inbox, conversation list): configured agents (enabled or not, their tools,
    a tool list that is not a list of names ignored) and enabled remote apps (disabled ones left
    out), in one query."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agents_app.agents import menus
    from agents_app.models import RemoteApp

    AgentConfig.objects.create(name="menu_on", tools=["tool_a", 7, "tool_b"])
    AgentConfig.objects.create(name="menu_off", enabled=False, tools=["tool_c"])
    for name, enabled in (("remote_on", True), ("remote_off", False)):
        RemoteApp.objects.create(name=name, base_url="http://127.0.0.1:9", remote_app_name="x", enabled=enabled)
    with CaptureQueriesContext(connection) as ctx:
        found = menus()
    assert len(ctx.captured_queries) == 1
    assert {"menu_on", "remote_on"} <= set(found.apps) and not {"menu_off", "remote_off"} & set(found.apps)
    assert {"menu_on", "menu_off", "remote_on"} <= set(found.all_apps) and "remote_off" not in found.all_apps
    assert {"tool_a", "tool_b", "tool_c"} <= set(found.tools) and "7" not in found.tools
    assert found.apps == sorted(found.apps) and found.tools == sorted(found.tools)
