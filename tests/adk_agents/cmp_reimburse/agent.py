"""The seed reimbursement agent: a long-running approval, then `reimburse`."""

from google.adk.agents import LlmAgent

from agents_app.demo.model import DemoLlm
from agents_app.demo.tools import ask_for_approval, reimburse  # noqa: F401 (registers them)
from agents_app.tools import registry

root_agent = LlmAgent(
    name="reimbursement",
    model=DemoLlm(),
    instruction="Reimburse small amounts; ask for approval above $100.",
    tools=[registry.get("ask_for_approval").build(), registry.get("reimburse").build()],
)
