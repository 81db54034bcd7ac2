"""An agent used as a tool with skip_summarization: the child's answer ends the parent's turn."""

from google.adk.agents import LlmAgent
from google.adk.tools.agent_tool import AgentTool

from agents_app.demo.model import DemoLlm

summary = LlmAgent(name="summary", description="Summarises a request.", model=DemoLlm())
root_agent = LlmAgent(name="assistant", model=DemoLlm(), tools=[AgentTool(agent=summary, skip_summarization=True)])
