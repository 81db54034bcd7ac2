"""Values as a person reads them, in one line: money as $200.00, yes/no, lists joined, a tool's
arguments in its declared parameter order (PostgreSQL's jsonb does not keep JSON key order), and a
ticket's one-line summary (the inbox, cards, notifications).

No queries and no markup: the conversation timeline (`agents_app.timeline`), the approvals templates
and the notifications render with these.
"""

from __future__ import annotations

import inspect
import json
from functools import lru_cache
from typing import Any

MONEY_KEYS = ("amount", "price", "total", "cost", "sum", "budget")
SUMMARY_MAX = 120


def is_money_key(key: str) -> bool:
    return any(word in key.lower() for word in MONEY_KEYS)


def readable(value: Any, key: str = "") -> str:
    """One value as a person would write it: $200.00 for amounts, yes/no, lists joined."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)) and is_money_key(key):
        return f"${value:,.2f}"
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".")
    if isinstance(value, (list, tuple)):
        return ", ".join(readable(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return "" if value is None else str(value)


@lru_cache(maxsize=256)
def parameter_order(tool_name: str) -> tuple[str, ...]:
    """A registry tool's parameters in signature order; () for anything else."""
    from .tools import registry

    func = registry.get(tool_name).func if tool_name and tool_name in registry else None
    return tuple(inspect.signature(func).parameters) if func is not None else ()


def ordered_keys(args: dict[str, Any], tool_name: str = "") -> list[str]:
    order = parameter_order(tool_name)
    return sorted(args, key=lambda k: (order.index(k) if k in order else len(order), k if order else ""))


def summarize(value: Any, limit: int = 120, tool_name: str = "", key: str = "") -> str:
    """A one-line human summary of a JSON value ("purpose: meals · amount: $200.00"), a tool's
    arguments in its declared order."""
    if isinstance(value, dict):
        keys = ordered_keys(value, tool_name)
        text = " · ".join(f"{k}: {summarize(value[k], 40, key=k)}" for k in keys)
    elif isinstance(value, list):
        text = ", ".join(summarize(v, 40) for v in value)
    elif value is None:
        text = "—"
    else:
        text = readable(value, key)
    return _shorten(text, limit)


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


# -- tickets in a line (the inbox, cards) ---------------------------------------------------------
def _shorten(text: str, limit: int = SUMMARY_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarize_values(args: Any, tool_name: str = "") -> str:
    """A tool's argument values in its declared order, e.g. "meals · $200.00" (no keys)."""
    if not isinstance(args, dict) or not args:
        return ""
    keys = ordered_keys(args, tool_name)
    return _shorten(" · ".join(readable(args[k], k) for k in keys if args[k] not in (None, "")))


def ticket_summary(ticket: Any) -> str:
    """e.g. "meals · $200.00"; for a confirmation, what will run; for input, the question. The arguments
    an approval approves now (`current_args`: an approver's edit, else the agent's): mark an edit beside
    it (approvals.edits.edit_note)."""
    args = ticket.args or {}
    if ticket.kind == "confirmation":
        name = ticket.original_call.get("name", ticket.tool_name)
        return _shorten(f"{name}: {summarize_values(ticket.current_args, name)}")
    if ticket.kind == "input":
        return _shorten(str(args.get("message", "")))
    if ticket.kind == "choice":
        return _shorten("options: " + " / ".join(str(o) for o in args.get("options") or []))
    return summarize_values(ticket.current_args, ticket.tool_name)
