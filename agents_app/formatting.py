"""How tool arguments and results read to a person, on every page: money as $200.00, yes/no,
lists joined, and a tool's arguments in its declared parameter order (PostgreSQL's jsonb does
not keep JSON key order)."""

from __future__ import annotations

import inspect
import json
from functools import lru_cache
from typing import Any

MONEY_KEYS = ("amount", "price", "total", "cost", "sum", "budget")


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

    if not tool_name or tool_name not in registry or registry.get(tool_name).func is None:
        return ()
    return tuple(inspect.signature(registry.get(tool_name).func).parameters)


def ordered_keys(args: dict[str, Any], tool_name: str = "") -> list[str]:
    order = parameter_order(tool_name)
    return sorted(args, key=lambda k: (order.index(k) if k in order else len(order), k if order else ""))
