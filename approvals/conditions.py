"""A small, safe expression language over a tool call's arguments, for policy conditions.

    amount > 1000 and purpose != "travel"
    recipient in ["Bob", "Alice"] or lower(purpose) == "hardware"
    not (amount <= 100) and urgency in ("high", "critical")

Parsed into a tree by a hand-written recursive-descent parser and evaluated by walking it: no
`eval`, no attribute access, no calls but the few listed in FUNCTIONS. Evaluation is total: a
missing argument is null, and an ordering comparison between values that do not compare (a string
and a number, null) is false, so a condition never raises on whatever arguments a model sends.
A number written as a string ("1500") compares as a number with a number.
"""

from __future__ import annotations

import math
from typing import Any

from .condition_parser import FUNCTIONS, ConditionError, Node, is_number, parse

__all__ = ["ConditionError", "Node", "evaluate", "names", "parse", "validate"]


def validate(text: str) -> str | None:
    """None if the condition parses (an empty one means "always"), else the error message."""
    if not text.strip():
        return None
    try:
        parse(text)
    except ConditionError as exc:
        return str(exc)
    return None


def names(text: str) -> set[str]:
    """The argument names a condition reads (the first segment of each path)."""
    found: set[str] = set()

    def walk(node: Node) -> None:
        if node.kind == "var":
            found.add(node.value)
        for child in node.children:
            walk(child)

    if text.strip():
        walk(parse(text))
    return found


# -- evaluation ------------------------------------------------------------------------------------
def _as_number(v: Any) -> float | None:
    if is_number(v):
        return float(v)
    if isinstance(v, str):
        try:
            n = float(v.strip())
        except ValueError:
            return None
        return n if math.isfinite(n) else None
    return None


def _comparable(a: Any, b: Any) -> tuple[Any, Any] | None:
    if is_number(a) or is_number(b):
        na, nb = _as_number(a), _as_number(b)
        return (na, nb) if na is not None and nb is not None else None
    if isinstance(a, str) and isinstance(b, str):
        return a, b
    return None


def _equal(a: Any, b: Any) -> bool:
    pair = _comparable(a, b)
    if pair is not None:
        return bool(pair[0] == pair[1])
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def _contains(container: Any, item: Any) -> bool:
    if isinstance(container, str):
        return isinstance(item, str) and item in container
    if isinstance(container, list):
        return any(_equal(item, x) for x in container)
    if isinstance(container, dict):
        return isinstance(item, str) and item in container
    return False


def _compare(op: str, a: Any, b: Any) -> bool:
    if op == "==":
        return _equal(a, b)
    if op == "!=":
        return not _equal(a, b)
    if op == "in":
        return _contains(b, a)
    if op == "not in":
        return not _contains(b, a)
    pair = _comparable(a, b)
    if pair is None:
        return False
    x, y = pair
    return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]


def _truthy(v: Any) -> bool:
    return bool(v) and v is not None


def _value(node: Node, args: dict[str, Any]) -> Any:
    kind = node.kind
    if kind == "lit":
        return node.value
    if kind == "var":
        return args.get(node.value)
    if kind == "get":
        base = _value(node.children[0], args)
        key = node.value
        if isinstance(base, dict) and isinstance(key, str):
            return base.get(key)
        if isinstance(base, list) and isinstance(key, int) and -len(base) <= key < len(base):
            return base[key]
        return None
    if kind == "list":
        return [_value(c, args) for c in node.children]
    if kind == "call":
        return FUNCTIONS[node.value](_value(node.children[0], args))
    if kind == "cmp":
        return _compare(node.value, _value(node.children[0], args), _value(node.children[1], args))
    if kind == "not":
        return not _truthy(_value(node.children[0], args))
    if kind == "and":
        return _truthy(_value(node.children[0], args)) and _truthy(_value(node.children[1], args))
    if kind == "or":
        return _truthy(_value(node.children[0], args)) or _truthy(_value(node.children[1], args))
    raise AssertionError(kind)


def evaluate(text: str, args: dict[str, Any]) -> bool:
    """Whether the arguments satisfy the condition (an empty condition always holds)."""
    if not text.strip():
        return True
    return _truthy(_value(parse(text), args if isinstance(args, dict) else {}))
