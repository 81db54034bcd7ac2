"""A throwaway code-defined agent whose tool raises on demand (for the failed-turn scenario).

It is a code agent (ADKWEB_CODE_AGENTS) rather than a registry tool + AgentConfig so that the
integration worker subprocess can import it too: the env var reaches the subprocess, a registry
entry made inside the test process would not.
"""

from __future__ import annotations

from google.adk.agents import LlmAgent
from google.adk.tools import FunctionTool

from agents_app.demo.model import DemoLlm

APP_NAME = "flaky_agent"
DOTTED = "tests.engine_scenarios.flaky.flaky_agent"


def lookup_order(request: str) -> dict:
    """Look up an order in the order system."""
    if "boom" in request.lower():
        raise RuntimeError("order system is down")
    return {"status": "found", "order": request}


flaky_agent = LlmAgent(
    name=APP_NAME, model=DemoLlm(), instruction="Look up orders.", tools=[FunctionTool(lookup_order)]
)
