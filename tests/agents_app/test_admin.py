"""Agent configuration in the Django admin, the tool registry, and code-defined agents."""

import pytest
from django.test import override_settings

from agents_app.agents import AgentConfigError, app_names, build_agent
from agents_app.models import AgentConfig, AgentToolLink
from agents_app.tools import ToolRegistry, registry

pytestmark = pytest.mark.django_db


def test_admin_change_page_shows_tool_declarations_as_adk_builds_them(client, demo):
    client.force_login(demo["admin"])
    config = AgentConfig.objects.get(name="reimbursement_agent")
    page = client.get(f"/admin/agents_app/agentconfig/{config.pk}/change/").content.decode()
    assert "ask_for_approval" in page and "long-running: the agent pauses for a response" in page
    # ADK appends its long-running note to the description the model sees.
    assert "This is a long-running operation" in page
    assert "&quot;amount&quot;" in page  # the parameters schema, escaped JSON


def test_admin_save_bumps_version_and_rejects_bad_generation_settings(client, demo):
    client.force_login(demo["admin"])
    config = AgentConfig.objects.get(name="stock_agent")
    form = {
        "name": "stock_agent",
        "description": "d",
        "model": "demo-offline",
        "instruction": "i",
        "tools": ["get_stock_price"],
        "generation_settings": '{"temperature": "hot"}',
        "enabled": "on",
        "agent_tools-TOTAL_FORMS": "0",
        "agent_tools-INITIAL_FORMS": "0",
    }
    url = f"/admin/agents_app/agentconfig/{config.pk}/change/"
    bad = client.post(url, form)
    assert bad.status_code == 200 and "Not valid generation settings" in bad.content.decode()
    form["generation_settings"] = '{"temperature": 0.1}'
    assert client.post(url, form).status_code == 302
    config.refresh_from_db()
    assert config.version == 2 and config.generation_settings == {"temperature": 0.1}


@pytest.mark.parametrize(
    "settings_json",
    [
        '{"temperature": NaN}',
        '{"temperature": 1e400}',
        '{"stop_sequences": ["a\\u0000"]}',
        '{"stop_sequences": ["\\ud800"]}',
    ],
    ids=["NaN", "past a float", "NUL", "lone surrogate"],
)
def test_admin_refuses_generation_settings_no_database_stores(client, demo, settings_json):
    """Django's form JSON field parses NaN, 1e400 (infinity) and NUL or surrogate escapes: the save answered
    500 (NaN and infinity on both databases, NUL and surrogates on PostgreSQL, or stored them on SQLite);
    now the form again with its error, and the agent unchanged."""
    client.force_login(demo["admin"])
    config = AgentConfig.objects.get(name="stock_agent")
    description = config.description
    form = {
        "name": "stock_agent",
        "description": "changed",
        "model": "demo-offline",
        "instruction": "i",
        "tools": ["get_stock_price"],
        "generation_settings": settings_json,
        "enabled": "on",
        "agent_tools-TOTAL_FORMS": "0",
        "agent_tools-INITIAL_FORMS": "0",
    }
    page = client.post(f"/admin/agents_app/agentconfig/{config.pk}/change/", form)
    assert page.status_code == 200 and "which cannot be stored" in page.content.decode()
    config.refresh_from_db()
    assert (config.version, config.description, config.generation_settings) == (1, description, {})


def test_built_agent_uses_registry_tools_and_agent_tools(demo):
    agent = build_agent("assistant_agent")
    (tool,) = agent.tools
    assert type(tool).__name__ == "AgentTool" and tool.skip_summarization and tool.agent.name == "summary_agent"
    names = sorted(t.name for t in build_agent("reimbursement_agent").tools)
    assert names == ["ask_for_approval", "reimburse"]


def test_agent_using_itself_through_another_is_refused(demo):
    a = AgentConfig.objects.get(name="assistant_agent")
    s = AgentConfig.objects.get(name="summary_agent")
    AgentToolLink.objects.create(parent=s, child=a)
    with pytest.raises(AgentConfigError, match="uses itself"):
        build_agent("assistant_agent")


def test_unknown_tool_is_a_clear_error(demo):
    AgentConfig.objects.create(name="broken_agent", tools=["no_such_tool"])
    with pytest.raises(AgentConfigError, match="unknown tool 'no_such_tool'"):
        build_agent("broken_agent")


def test_registry_kinds_and_duplicate_names():
    reg = ToolRegistry()

    @reg.long_running
    def wait_for_it(x: int) -> dict:
        """Wait."""
        return {}

    assert reg.get("wait_for_it").kind == "long-running"
    assert reg.get("wait_for_it").build().is_long_running

    def other(x: int) -> dict:
        return {}

    with pytest.raises(ValueError, match="already registered"):
        reg.register(other, name="wait_for_it")
    assert registry.get("transfer_money").kind == "needs confirmation"


# A code-defined ADK agent, registered from settings by dotted path, used unchanged.
def _code_agent():
    from google.adk.agents import LlmAgent

    from agents_app.demo.model import DemoLlm
    from agents_app.demo.tools import get_stock_price

    return LlmAgent(name="code_stock_agent", model=DemoLlm(), instruction="Prices.", tools=[get_stock_price])


code_stock_agent = _code_agent()


@override_settings(ADKWEB_CODE_AGENTS={"code_stock_agent": "tests.agents_app.test_admin.code_stock_agent"})
def test_code_defined_agent_is_an_app_and_runs(demo, worker, wait):
    from agents_app import services
    from agents_app.models import StoredEvent

    assert "code_stock_agent" in app_names() and "reimbursement_agent" in app_names()
    session = services.session_create(app_name="code_stock_agent", user_id="requester")
    services.message_send(session=session, text="price of MSFT", actor=demo["requester"])
    wait(
        lambda: StoredEvent.objects.filter(
            session=session, data__content__parts__0__text__icontains="$431.05"
        ).exists(),
        what="the code agent's answer",
    )


def test_login_page_shows_demo_logins_only_when_enabled(client, settings):
    settings.ADKWEB_SHOW_DEMO_LOGINS = False
    page = client.get("/accounts/login/").content.decode()
    assert "csrfmiddlewaretoken" in page and "approver-demo" not in page
    settings.ADKWEB_SHOW_DEMO_LOGINS = True
    assert "approver-demo" in client.get("/accounts/login/").content.decode()


def test_agent_admin_role_edits_agents_in_the_admin_and_nothing_else(client, demo):
    client.force_login(demo["agentadmin"])
    config = AgentConfig.objects.get(name="stock_agent")
    assert client.get(f"/admin/agents_app/agentconfig/{config.pk}/change/").status_code == 200
    assert client.get("/admin/agents_app/agentconfig/add/").status_code == 200
    assert client.get("/admin/auth/user/").status_code == 403
    assert client.get("/admin/approvals/pendingcall/").status_code == 403
    client.force_login(demo["approver"])  # not staff: no admin at all
    assert client.get(f"/admin/agents_app/agentconfig/{config.pk}/change/").status_code == 302


async def test_static_files_are_served_by_the_app_with_their_type(async_client):
    """ServeStatic's middleware (async, as under daphne), from the source folders here
    (tests/integration/test_static_services.py: collectstatic's hashed files under a real daphne)."""
    css = await async_client.get("/static/css/app.css")
    body = b"".join([chunk async for chunk in css.streaming_content])
    assert css.status_code == 200 and css["Content-Type"].startswith("text/css") and b".topbar" in body
    assert css["Cache-Control"] == "max-age=3600, public"
    admin_css = await async_client.get("/static/admin/css/base.css")  # the admin's own files too
    assert admin_css.status_code == 200 and admin_css["Content-Type"].startswith("text/css")
    js = await async_client.get("/static/vendor/htmx-2.0.11.min.js")
    assert js["Content-Type"].split(";")[0] in {"text/javascript", "application/javascript"}
    assert (await async_client.get("/static/nope.css")).status_code == 404
    escape = await async_client.get("/static/../adkweb/settings.py")
    assert escape.status_code in (400, 404) and b"SECRET_KEY" not in escape.content
