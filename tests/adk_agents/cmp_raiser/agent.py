"""A tool that raises: the run fails."""

from google.adk.agents import LlmAgent

from agents_app.demo.model import DemoLlm


def explode(reason: str) -> dict:
    """Fail on purpose."""
    raise RuntimeError(f"the tool exploded: {reason}")


root_agent = LlmAgent(name="raiser", model=DemoLlm(), tools=[explode])
