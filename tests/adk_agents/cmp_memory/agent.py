"""Memory: a tool that searches what earlier sessions of the user left in the memory service."""

from typing import Any

from google.adk.agents import LlmAgent
from google.adk.tools.tool_context import ToolContext

from agents_app.demo.model import DemoLlm


async def recall(request: str, tool_context: ToolContext) -> dict[str, Any]:
    """Search the user's memory for the request."""
    found = await tool_context.search_memory(request)
    texts = [" ".join(p.text or "" for p in m.content.parts or []) for m in found.memories]
    return {"memories": texts, "authors": [m.author for m in found.memories]}


root_agent = LlmAgent(name="memory", model=DemoLlm(), tools=[recall])
