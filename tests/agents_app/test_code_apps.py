"""Users bring ADK's own building blocks: an `App` (plugins, resumability, its name) by dotted path,
and an agents folder laid out for `adk api_server`, loaded with ADK's own loader."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from google.adk.apps import App, ResumabilityConfig
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.plugins.base_plugin import BasePlugin

from agents_app import agents, services
from agents_app.agents import AgentConfigError
from agents_app.session_service import DjangoSessionService
from tests.engine_scenarios import agent_texts, failed_turns, settle


class StampPlugin(BasePlugin):
    """Writes to session state before the agent runs: proof that the App's plugins ran."""

    def __init__(self) -> None:
        super().__init__(name="stamp")

    async def before_agent_callback(self, *, agent: Any, callback_context: Any) -> None:
        callback_context.state["stamped_by"] = self.name


def _summary_agent(name: str) -> Any:
    from google.adk.agents import LlmAgent

    from agents_app.demo.model import DemoLlm

    return LlmAgent(name=name, model=DemoLlm(model="demo-offline"), instruction="Summarise.")


resumable_app = App(
    name="resumable_app",
    root_agent=_summary_agent("summariser"),
    plugins=[StampPlugin()],
    resumability_config=ResumabilityConfig(is_resumable=True),
)


def test_an_app_by_bare_dotted_path_is_named_by_the_app_and_runs_its_plugins(demo, worker, wait, settings):
    settings.ADKWEB_CODE_AGENTS = {f"{__name__}.resumable_app": f"{__name__}.resumable_app"}
    assert "resumable_app" in agents.app_names()
    built = agents.build_app("resumable_app")
    assert built is resumable_app and agents.build_agent("resumable_app").name == "summariser"

    session = services.session_create(app_name="resumable_app", user_id="requester")
    services.message_send(session=session, text="a short note to summarise", actor=demo["requester"])
    settle(session, wait)
    assert failed_turns(session) == []
    assert agent_texts(session) == ["Summary (5 words): a short note to summarise"]
    stored = DjangoSessionService().get_session_sync(
        app_name="resumable_app", user_id="requester", session_id=session.session_id
    )
    assert stored.state["stamped_by"] == "stamp"
    # Resumability on: ADK closes the agent's run with an end_of_agent event.
    assert any(e.actions.end_of_agent for e in stored.events)


def test_an_app_mapped_under_another_name_is_refused_clearly(demo, settings):
    settings.ADKWEB_CODE_AGENTS = {"other_name": f"{__name__}.resumable_app"}
    with pytest.raises(AgentConfigError, match="an App named 'resumable_app'"):
        agents.build_app("other_name")


def test_an_agent_by_dotted_path_becomes_an_app_of_that_name(demo, settings):
    settings.ADKWEB_CODE_AGENTS = {"plain_app": f"{__name__}.plain_agent"}
    app = agents.build_app("plain_app")
    assert isinstance(app, App) and app.name == "plain_app" and app.root_agent is plain_agent


plain_agent = _summary_agent("plain_agent")


def test_an_agents_folder_is_loaded_with_adks_loader(demo, worker, wait, settings, tmp_path):
    folder = tmp_path / "dir_summary_app"
    folder.mkdir()
    (folder / "__init__.py").write_text("from . import agent\n")
    (folder / "agent.py").write_text(
        textwrap.dedent(
            """
            from google.adk.agents import LlmAgent
            from agents_app.demo.model import DemoLlm

            root_agent = LlmAgent(name="folder_agent", model=DemoLlm(model="demo-offline"))
            """
        )
    )
    (tmp_path / "not_an_agent").mkdir()
    settings.ADKWEB_AGENTS_DIR = str(tmp_path)
    assert "dir_summary_app" in agents.app_names() and "not_an_agent" not in agents.app_names()
    # As in `adk api_server`, the folder's name is the app name.
    assert agents.build_app("dir_summary_app").name == "dir_summary_app"

    session = services.session_create(app_name="dir_summary_app", user_id="requester")
    services.message_send(session=session, text="hello from a folder", actor=demo["requester"])
    settle(session, wait)
    assert failed_turns(session) == []
    assert agent_texts(session) == ["Summary (4 words): hello from a folder"]


class RecordingMemory(BaseMemoryService):
    """A memory service chosen by dotted path (ADKWEB_MEMORY_SERVICE): records what tools search."""

    searches: list[tuple[str, str, str]] = []

    async def add_session_to_memory(self, session: Any) -> None:
        pass

    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> Any:
        RecordingMemory.searches.append((app_name, user_id, query))
        return SearchMemoryResponse(memories=[])


async def recall(topic: str, tool_context: Any) -> dict:
    """Search the user's memory."""
    found = await tool_context.search_memory(topic)
    return {"memories": len(found.memories)}


def _recall_agent() -> Any:
    from google.adk.agents import LlmAgent

    from agents_app.demo.model import DemoLlm

    return LlmAgent(name="recall_agent", model=DemoLlm(model="demo-offline"), tools=[recall])


recall_agent = _recall_agent()


@pytest.mark.parametrize("choice", ["memory", f"{__name__}.RecordingMemory"])
def test_runs_get_the_configured_memory_service(demo, worker, wait, settings, choice):
    settings.ADKWEB_CODE_AGENTS = {"recall_agent": f"{__name__}.recall_agent"}
    settings.ADKWEB_MEMORY_SERVICE = choice
    RecordingMemory.searches.clear()
    session = services.session_create(app_name="recall_agent", user_id="requester")
    services.message_send(session=session, text='/call recall {"topic": "budgets"}', actor=demo["requester"])
    settle(session, wait)
    assert failed_turns(session) == []
    assert agent_texts(session) == ['recall returned {"memories": 0}.']
    expected = [("recall_agent", "requester", "budgets")] if choice != "memory" else []
    assert RecordingMemory.searches == expected  # with "memory", ADK's in-memory service answered (no memories)


def test_tool_modules_and_api_timeouts_come_from_the_environment():
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "adkweb.settings",
        "ADKWEB_TOOL_MODULES": "agents_app.demo.tools, myproject.tools",
        "ADKWEB_API_RUN_TIMEOUT": "30",
        "ADKWEB_AGENTS_DIR": "/srv/agents",
        "ADKWEB_MEMORY_SERVICE": "myproject.memory.Service",
    }
    code = (
        "from django.conf import settings as s; "
        "print(s.ADKWEB_TOOL_MODULES, s.ADKWEB_API_RUN_TIMEOUT, s.ADKWEB_AGENTS_DIR, s.ADKWEB_MEMORY_SERVICE)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['agents_app.demo.tools', 'myproject.tools'] 30.0 /srv/agents myproject.memory.Service"


def test_a_yaml_agent_in_the_agents_folder_is_listed_as_yaml_and_runs(demo, worker, wait, settings, tmp_path):
    from django.test import Client

    folder = tmp_path / "yaml_app"
    folder.mkdir()
    (folder / "root_agent.yaml").write_text("name: yaml_agent\nmodel: demo-offline\ninstruction: Summarise.\n")
    settings.ADKWEB_AGENTS_DIR = str(tmp_path)
    c = Client()
    c.force_login(demo["requester"])
    [app] = [a for a in c.get("/api/adk/list-apps?detailed=true").json()["apps"] if a["name"] == "yaml_app"]
    assert (app["rootAgentName"], app["language"]) == ("yaml_agent", "yaml")  # as ADK's list-apps says
    session = services.session_create(app_name="yaml_app", user_id="requester")
    services.message_send(session=session, text="a yaml agent answers", actor=demo["requester"])
    settle(session, wait)
    assert failed_turns(session) == []
    assert agent_texts(session) == ["Summary (4 words): a yaml agent answers"]
