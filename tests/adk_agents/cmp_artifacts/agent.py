"""A tool that saves an artifact: its function response carries `actions.artifactDelta`."""

from typing import Any

from google.adk.agents import LlmAgent
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from agents_app.demo.model import DemoLlm


async def save_report(text: str, tool_context: ToolContext) -> dict[str, Any]:
    """Save the text as the artifact report.txt."""
    version = await tool_context.save_artifact("report.txt", types.Part(text=text))
    return {"saved": "report.txt", "version": version}


root_agent = LlmAgent(name="reporter", model=DemoLlm(), tools=[save_report])
