"""A `temp:` state handoff: the run's stateDelta gives a tool a value that is never stored."""

from typing import Any

from google.adk.agents import LlmAgent
from google.adk.tools.tool_context import ToolContext

from agents_app.demo.model import DemoLlm


def read_note(tool_context: ToolContext) -> dict[str, Any]:
    """Read the note handed over for this run, and keep a copy in the session."""
    note = tool_context.state.get("temp:note")
    tool_context.state["last_note"] = note
    tool_context.state["temp:seen"] = True
    return {"note": note}


root_agent = LlmAgent(name="notes", model=DemoLlm(), tools=[read_note])
