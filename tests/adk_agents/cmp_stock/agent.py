"""A tool that returns a bare number (ADK wraps it as {"result": ...})."""

from google.adk.agents import LlmAgent

from agents_app.demo.model import DemoLlm
from agents_app.demo.tools import get_stock_price

root_agent = LlmAgent(name="stocks", model=DemoLlm(), tools=[get_stock_price])
