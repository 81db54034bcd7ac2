"""The seed's reimbursement agent on the offline demo model: the one agent both servers run in
bench/http_flow.py. `adk api_server bench/agents` loads it as app `bench_reimbursement`; adkweb loads
the same object as a code agent (ADKWEB_CODE_AGENTS=bench_reimbursement=bench_reimbursement.agent.root_agent,
with bench/agents on PYTHONPATH). No network: DemoLlm decides from the conversation and the tools offered.
"""

from __future__ import annotations

from typing import Any

from google.adk.agents import LlmAgent
from google.adk.tools import FunctionTool, LongRunningFunctionTool

from agents_app.demo.model import DemoLlm


def ask_for_approval(purpose: str, amount: float) -> dict[str, Any]:
    """Ask for approval for the reimbursement."""
    return {"status": "pending", "approver": "Sean Zhou", "purpose": purpose, "amount": amount, "ticket-id": "ticket-1"}


def reimburse(purpose: str, amount: float) -> dict[str, Any]:
    """Reimburse the amount of money to the employee."""
    return {"status": "ok"}


root_agent = LlmAgent(
    name="bench_reimbursement",
    model=DemoLlm(model="demo-offline"),
    instruction=(
        "You are an agent whose job is to handle the reimbursement process for the employees. If the amount is "
        "less than $100, you will automatically approve the reimbursement. If the amount is greater than $100, you "
        "will ask for approval from the manager. If the manager approves, you will call reimburse() to reimburse "
        "the amount to the employee. If the manager rejects, you will inform the employee of the rejection."
    ),
    tools=[FunctionTool(func=reimburse), LongRunningFunctionTool(func=ask_for_approval)],
)
