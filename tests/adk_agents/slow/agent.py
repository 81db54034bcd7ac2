"""A tool that takes its time: a remote ADK server that answers slowly (tests/agents_app/test_remote_apps.py)."""

import asyncio

from google.adk.agents import LlmAgent

from agents_app.demo.model import DemoLlm


async def wait_a_while(seconds: float) -> dict:
    """Wait, then say so."""
    await asyncio.sleep(seconds)
    return {"status": "waited", "seconds": seconds}


root_agent = LlmAgent(name="slow", model=DemoLlm(), tools=[wait_a_while])
