"""The demo tools, mirroring the ADK seed documents (offline: no real payments or markets)."""

from __future__ import annotations

import uuid
from typing import Any

from agents_app.tools import registry

# Offline mock prices for the stock tool.
MOCK_PRICES = {"GOOG": 178.42, "AAPL": 229.87, "MSFT": 431.05, "AMZN": 201.33, "NVDA": 142.61}


@registry.long_running
def ask_for_approval(purpose: str, amount: float) -> dict[str, Any]:
    """Ask for approval for the reimbursement."""
    return {
        "status": "pending",
        "approver": "Sean Zhou",
        "purpose": purpose,
        "amount": amount,
        "ticket-id": f"approval-ticket-{uuid.uuid4().hex[:8]}",
    }


@registry.tool
def reimburse(purpose: str, amount: float) -> dict[str, Any]:
    """Reimburse the amount of money to the employee."""
    return {"status": "ok", "purpose": purpose, "amount": amount}


@registry.long_running
def create_ticket_long_running(urgency: str) -> dict[str, Any]:
    """Creates a new support ticket with a specified urgency level.

    Args:
        urgency: The urgency level of the ticket (low, medium or high).
    """
    return {"status": "started", "ticket_id": f"TICKET-{uuid.uuid4().hex[:6].upper()}", "urgency": urgency}


@registry.tool
def get_stock_price(symbol: str) -> float | None:
    """Retrieves the current stock price for a given symbol.

    Args:
        symbol (str): The stock symbol (e.g., "AAPL", "GOOG").

    Returns:
        float: The current stock price, or None if the symbol is unknown.
    """
    return MOCK_PRICES.get(symbol.strip().upper())


@registry.tool(require_confirmation=True)
def transfer_money(amount: float, recipient: str, tool_context: Any = None) -> dict[str, Any]:
    """Transfer money to a recipient. A person must confirm every transfer before it runs.

    Args:
        amount: The amount to transfer, in dollars.
        recipient: Who receives the money.
    """
    # A confirmer who edited the transfer sends the values to use in the confirmation's payload.
    confirmation = getattr(tool_context, "tool_confirmation", None)
    edited = (confirmation.payload if confirmation is not None else None) or {}
    amount = edited.get("amount", amount)
    recipient = edited.get("recipient", recipient)
    return {
        "status": "transferred",
        "amount": amount,
        "recipient": recipient,
        "transfer-id": f"TR-{uuid.uuid4().hex[:8].upper()}",
    }


def _register_adk_pauses() -> None:
    """ADK's own pause tools: ask the user for structured input, or for a choice."""
    from google.adk.tools import get_user_choice, request_input

    registry.register_adk_tool(request_input)
    registry.register_adk_tool(get_user_choice)


_register_adk_pauses()
