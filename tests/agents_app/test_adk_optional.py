"""ADK's optional `remote_a2a_agent` import, which fails without the `a2a` extra, is attempted once
per process rather than on every run (agents_app.adk_optional): a run on a worker loop does not
look for the module again, and ADK still runs the agent."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
from typing import Any

import pytest
from google.adk.agents import LlmAgent
from google.adk.runners import InMemoryRunner
from google.genai import types

from agents_app import adk_optional, worker_loop
from agents_app.demo.model import DemoLlm

pytestmark = pytest.mark.skipif(importlib.util.find_spec("a2a") is not None, reason="the a2a extra is installed")


class Lookups(importlib.abc.MetaPathFinder):
    """Records every search for the module; finds nothing itself (the next finders do)."""

    def __init__(self) -> None:
        self.seen = 0

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == adk_optional.REMOTE_A2A_AGENT:
            self.seen += 1


async def two_runs() -> list[str]:
    runner = InMemoryRunner(agent=LlmAgent(name="echo", model=DemoLlm()), app_name="optional")
    texts = []
    for _ in range(2):
        session = await runner.session_service.create_session(app_name="optional", user_id="u")
        message = types.Content(role="user", parts=[types.Part(text="hello")])
        async for event in runner.run_async(user_id="u", session_id=session.id, new_message=message):
            texts += [p.text for p in (event.content.parts if event.content else []) if p.text]
    return texts


def test_runs_on_a_worker_loop_do_not_import_remote_a2a_agent_again(monkeypatch):
    monkeypatch.delitem(sys.modules, adk_optional.REMOTE_A2A_AGENT, raising=False)
    lookups = Lookups()
    monkeypatch.setattr(sys, "meta_path", [lookups, *sys.meta_path])
    result: dict[str, Any] = {}

    def in_a_new_thread() -> None:  # a thread of its own: its first loop is made here
        try:
            result["texts"] = worker_loop.run(two_runs())
        except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
            result["error"] = exc

    thread = threading.Thread(target=in_a_new_thread)
    thread.start()
    thread.join(30)
    assert "error" not in result, result.get("error")
    assert len(result["texts"]) >= 2  # the agent answered both runs
    assert lookups.seen == 0
    with pytest.raises(ImportError):
        importlib.import_module(adk_optional.REMOTE_A2A_AGENT)
