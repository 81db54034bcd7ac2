"""ADK tool confirmation: transfer_money runs only once a person confirms it."""

from google.adk.agents import LlmAgent

from agents_app.demo.model import DemoLlm
from agents_app.demo.tools import transfer_money  # noqa: F401 (registers it)
from agents_app.tools import registry

root_agent = LlmAgent(name="transfers", model=DemoLlm(), tools=[registry.get("transfer_money").build()])
