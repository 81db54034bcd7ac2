"""Agent configuration history: every saved change to an agent (admin, demo_setup) is a version row
with who and when; each turn records the version it ran with; the conversation page shows it."""

from __future__ import annotations

from agents_app import services
from agents_app.config_history import agent_config_record
from agents_app.demo.setup import demo_setup
from agents_app.models import AgentConfig, AgentConfigVersion, Turn
from tests.engine_scenarios import settle

ADMIN_FORM = "/admin/agents_app/agentconfig"


def _form(config: AgentConfig, **changes) -> dict:
    data = {
        "name": config.name,
        "description": config.description,
        "model": config.model,
        "instruction": config.instruction,
        "tools": list(config.tools),
        "generation_settings": "{}",
        "enabled": "on",
        "agent_tools-TOTAL_FORMS": "0",
        "agent_tools-INITIAL_FORMS": "0",
        "agent_tools-MIN_NUM_FORMS": "0",
        "agent_tools-MAX_NUM_FORMS": "1000",
    }
    data.update(changes)
    return data


def test_demo_setup_records_version_1_once(demo):
    stock = AgentConfig.objects.get(name="stock_agent")
    (v1,) = AgentConfigVersion.objects.filter(agent=stock)
    assert (v1.version, v1.agent_name, v1.changed_by_username) == (1, "stock_agent", "")
    assert v1.config["tools"] == ["get_stock_price"] and v1.config["model"] == stock.model
    assistant = AgentConfigVersion.objects.get(agent__name="assistant_agent")
    assert assistant.config["agent_tools"] == [{"agent": "summary_agent", "skip_summarization": True}]
    demo_setup()  # again: nothing changed, no new version
    assert AgentConfigVersion.objects.filter(agent=stock).count() == 1


def test_admin_changes_are_versions_with_who_and_when(demo, client):
    client.force_login(demo["admin"])
    stock = AgentConfig.objects.get(name="stock_agent")
    url = f"{ADMIN_FORM}/{stock.pk}/change/"
    r = client.post(url, _form(stock, instruction="Quote prices in euros.", generation_settings='{"temperature": 0.1}'))
    assert r.status_code == 302, r.content.decode()[:2000]
    v2 = AgentConfigVersion.objects.get(agent=stock, version=2)
    assert v2.changed_by_username == "admin" and v2.created_at is not None
    assert v2.config["instruction"] == "Quote prices in euros."
    assert v2.config["generation_settings"] == {"temperature": 0.1}
    assert AgentConfigVersion.objects.get(agent=stock, version=1).config["instruction"].startswith("You are an agent")
    stock.refresh_from_db()
    assert stock.version == 2
    # Saved without a change: no new version.
    assert client.post(url, _form(stock, generation_settings='{"temperature": 0.1}')).status_code == 302
    assert AgentConfigVersion.objects.filter(agent=stock).count() == 2
    # Tools and agents used as tools are part of it.
    r = client.post(
        url,
        _form(
            stock,
            generation_settings='{"temperature": 0.1}',
            **{
                "agent_tools-TOTAL_FORMS": "1",
                "agent_tools-0-child": str(AgentConfig.objects.get(name="summary_agent").pk),
            },
        ),
    )
    assert r.status_code == 302
    v3 = AgentConfigVersion.objects.get(agent=stock, version=3)
    assert v3.config["agent_tools"] == [{"agent": "summary_agent", "skip_summarization": False}]
    # The history is on the agent's admin page, and read-only.
    page = client.get(url).content.decode()
    assert "v3" in page and "v2" in page and "(admin, " in page
    assert client.get(f"/admin/agents_app/agentconfigversion/{v2.pk}/delete/").status_code == 403
    assert client.post(f"/admin/agents_app/agentconfigversion/{v2.pk}/change/", {}).status_code == 403


def test_a_new_agent_in_the_admin_is_version_1(demo, client):
    client.force_login(demo["admin"])
    stock = AgentConfig.objects.get(name="stock_agent")
    r = client.post(f"{ADMIN_FORM}/add/", _form(stock, name="stock_agent_two"))
    assert r.status_code == 302, r.content.decode()[:2000]
    (v1,) = AgentConfigVersion.objects.filter(agent__name="stock_agent_two")
    assert (v1.version, v1.changed_by_username) == (1, "admin")


def test_deleting_an_agent_keeps_its_versions(demo):
    config = AgentConfig.objects.get(name="ticket_agent")
    config.delete()
    (kept,) = AgentConfigVersion.objects.filter(agent_name="ticket_agent")
    assert kept.agent_id is None and kept.config["tools"] == ["create_ticket_long_running"]


def test_each_turn_records_the_configuration_it_ran_with(demo, worker, wait, client):
    stock = AgentConfig.objects.get(name="stock_agent")
    session = services.session_create(app_name="stock_agent", user_id="requester")
    services.message_send(session=session, text="What is GOOG at?", streaming=False)
    settle(session, wait)
    first = Turn.objects.get(session=session)
    assert first.config_version == AgentConfigVersion.objects.get(agent=stock, version=1)

    stock.instruction = "Quote <b>prices</b> & say where they come from."
    stock.save()
    v2 = agent_config_record(config=stock, actor=demo["admin"])
    assert v2 is not None and v2.version == 2
    services.message_send(session=session, text="And MSFT?", streaming=False)
    settle(session, wait)
    second = Turn.objects.filter(session=session).exclude(pk=first.pk).get()
    assert second.config_version == v2

    client.force_login(demo["requester"])
    page = client.get(f"/sessions/{session.pk}/").content.decode()
    assert f"Turn #{first.pk} ran with <strong>config v1</strong>" in page
    assert f"Turn #{second.pk} ran with <strong>config v2</strong>" in page
    assert "by admin" in page and "get_stock_price" in page
    assert "Quote &lt;b&gt;prices&lt;/b&gt; &amp; say where they come from." in page  # escaped


def test_code_agents_run_with_no_config_version(demo, settings):
    from agents_app.runner import app_and_config_version

    app, version = app_and_config_version("stock_agent")
    assert app.name == "stock_agent" and version == AgentConfigVersion.objects.get(agent__name="stock_agent").pk
    settings.ADKWEB_CODE_AGENTS = {"plain_app": "tests.agents_app.test_code_apps.plain_agent"}
    app, version = app_and_config_version("plain_app")  # its configuration is its code, not versioned here
    assert app.name == "plain_app" and version is None
