"""The README's "Add a tool" and "Add an agent" (from code), followed as written: its tools module
(`mytools.py`) registers three tools of the kinds the agent form lists, and its `myagents.py` (an ADK agent on
the offline demo model by name, with `get_weather`) runs a turn with the tool playground's `/call`. The code is
read from the README itself, so the two cannot drift apart."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents_app import admin, services
from agents_app.tools import registry
from tests.engine_scenarios import agent_texts, failed_turns, settle

README = Path(__file__).resolve().parents[2] / "README.md"


def _python_blocks(start: str, end: str) -> list[str]:
    text = README.read_text()
    section = text[text.index(start) : text.index(end)]
    return [re.sub(r"^  ", "", block, flags=re.M) for block in re.findall(r"```python\n(.*?)```", section, re.S)]


@pytest.fixture
def readme_modules(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    tools = _python_blocks("## Add a tool", "## Add an agent")[0]
    (agent,) = _python_blocks("## Add an agent", "## Add a remote app")
    (tmp_path / "mytools.py").write_text(tools)
    (tmp_path / "myagents.py").write_text(agent)
    monkeypatch.syspath_prepend(str(tmp_path))
    before = dict(registry._tools)
    yield tmp_path
    registry._tools.clear()
    registry._tools.update(before)  # the other tests' registry, as it was
    for name in ("mytools", "myagents"):
        sys.modules.pop(name, None)


def test_the_readmes_tools_register_as_the_agent_form_lists_them(readme_modules):
    import mytools  # noqa: F401  (what ADKWEB_TOOL_MODULES=agents_app.demo.tools,mytools imports)

    offered = dict(admin._tool_choices())
    assert offered["get_weather"] == "get_weather (function)"
    assert offered["ask_for_budget"] == "ask_for_budget (long-running)"
    assert offered["delete_account"] == "delete_account (needs confirmation)"
    assert "ask_for_approval" in offered  # the demo's tools kept beside them


def test_the_readmes_code_agent_runs_its_tool_on_the_demo_model(readme_modules, demo, worker, wait, settings):
    settings.ADKWEB_CODE_AGENTS = {"weather_agent": "myagents.root_agent"}  # as the README runs it
    session = services.session_create(app_name="weather_agent", user_id="requester")
    services.message_send(session=session, text='/call get_weather {"city": "Paris"}', actor=demo["requester"])
    settle(session, wait)
    assert failed_turns(session) == []
    assert agent_texts(session) == ['get_weather returned {"report": "Sunny in Paris", "status": "success"}.']
