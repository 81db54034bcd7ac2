"""A small, safe expression language over a tool call's arguments, for policy conditions.

    amount > 1000 and purpose != "travel"
    recipient in ["Bob", "Alice"] or lower(purpose) == "hardware"
    not (amount <= 100) and urgency in ("high", "critical")

Parsed into a tree by a hand-written recursive-descent parser and evaluated by walking it: no
`eval`, no attribute access, no calls but the few listed in FUNCTIONS. Evaluation is total (it never
raises on whatever arguments a model sends) and three-valued (`decide`): a condition holds, does not,
or cannot be decided on these arguments, when an operand it reads is missing or unreadable: an
amount "2.500,00" or "lots" compared with a number, null ordered against anything, an argument the
call lacks. Unknown combines as in SQL: false and unknown is false, true or unknown is true, not
unknown is unknown. A number written as a string compares as a number with a number, money included
("$2,500", "2500 USD": approvals.condition_numbers). Equality with null (`note == null`) is how a
condition asks whether an argument is there: that is always decided.
"""

from __future__ import annotations

import json
import operator
from dataclasses import dataclass
from typing import Any

from .condition_numbers import read_number
from .condition_parser import FUNCTIONS, ConditionError, Node, is_number, parse

__all__ = ["ConditionError", "Node", "Verdict", "decide", "evaluate", "names", "parse", "validate"]


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
@dataclass(frozen=True)
class Verdict:
    """Whether arguments meet a condition: `holds` True or False, or None when it cannot be decided on
    them; then `why` says what could not be read ("amount '2.500,00' could not be read as a number")."""

    holds: bool | None
    why: str = ""


@dataclass(frozen=True)
class _Unknown:
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class _Missing:
    label: str  # the path the arguments do not have


ORDER = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


def _label(node: Node) -> str:
    if node.kind == "var":
        return str(node.value)
    if node.kind == "get":
        key = node.value
        return f"{_label(node.children[0])}" + (
            f".{key}" if isinstance(key, str) and key.isidentifier() else f"[{key!r}]"
        )
    if node.kind == "call":
        return f"{node.value}({_label(node.children[0])})"
    return _shown(node.value) if node.kind == "lit" else "the value"


def _shown(v: Any) -> str:
    text = repr(v) if isinstance(v, str) else json.dumps(v, default=str)
    return text if len(text) <= 40 else text[:38] + "…" + text[-1]


def _unknown(*parts: Any) -> _Unknown:
    reasons: list[str] = []
    for part in parts:
        for reason in part.reasons if isinstance(part, _Unknown) else (part,):
            if reason not in reasons:
                reasons.append(reason)
    return _Unknown(tuple(reasons))


def _unreadable(v: Any, label: str) -> _Unknown:
    return _unknown(f"{label} {_shown(v)} could not be read as a number")


class _Evaluation:
    def __init__(self, args: dict[str, Any], missing_is_unknown: bool) -> None:
        self.args, self.missing_is_unknown = args, missing_is_unknown

    def value(self, node: Node) -> Any:
        kind = node.kind
        if kind == "lit":
            return node.value
        if kind == "var":
            return self.args[node.value] if node.value in self.args else _Missing(_label(node))
        if kind == "get":
            base, key = self.value(node.children[0]), node.value
            if isinstance(base, dict) and isinstance(key, str) and key in base:
                return base[key]
            if isinstance(base, list) and isinstance(key, int) and -len(base) <= key < len(base):
                return base[key]
            return base if isinstance(base, _Unknown) else _Missing(_label(node))
        if kind == "list":
            return [self.value(c) for c in node.children]
        if kind == "call":
            arg = self.value(node.children[0])
            return arg if isinstance(arg, _Unknown | _Missing) else FUNCTIONS[node.value](arg)
        if kind == "cmp":
            left, right = node.children
            return self.compare(node.value, self.value(left), self.value(right), _label(left), _label(right))
        if kind == "not":
            inner = self.truth(self.value(node.children[0]))
            return inner if isinstance(inner, _Unknown) else not inner
        if kind in ("and", "or"):
            truths = [self.truth(self.value(c)) for c in node.children]
            decisive = kind == "or"  # the value that decides: true for or, false for and
            if decisive in truths:
                return decisive
            unknown = [x for x in truths if isinstance(x, _Unknown)]
            return _unknown(*unknown) if unknown else not decisive
        raise AssertionError(kind)

    def truth(self, v: Any) -> bool | _Unknown:
        if isinstance(v, _Unknown):
            return v
        if isinstance(v, _Missing):
            return _unknown(f"{v.label} is missing") if self.missing_is_unknown else False
        return bool(v)

    def compare(self, op: str, a: Any, b: Any, la: str, lb: str) -> bool | _Unknown:
        if isinstance(a, _Unknown) or isinstance(b, _Unknown):
            return _unknown(*(x for x in (a, b) if isinstance(x, _Unknown)))
        if op in ("==", "!="):
            same = self.equal(a, b, la, lb)
            return same if isinstance(same, _Unknown) else same == (op == "==")
        if op in ("in", "not in"):
            found = self.contains(b, a, lb, la)
            return found if isinstance(found, _Unknown) else found == (op == "in")
        for v in (a, b):
            if isinstance(v, _Missing):
                return _unknown(f"{v.label} is missing") if self.missing_is_unknown else False
        if is_number(a) or is_number(b):
            na, nb = read_number(a), read_number(b)
            if na is None or nb is None:
                return _unreadable(a, la) if na is None else _unreadable(b, lb)
            return bool(ORDER[op](na, nb))
        if isinstance(a, str) and isinstance(b, str):
            return bool(ORDER[op](a, b))
        bad, label = (b, lb) if isinstance(a, str) else (a, la)
        return _unknown(f"{label} {_shown(bad)} does not compare with {lb if bad is a else la}")

    def equal(self, a: Any, b: Any, la: str, lb: str) -> bool | _Unknown:
        for v, other in ((a, b), (b, a)):
            if isinstance(v, _Unknown):
                return v
            if isinstance(v, _Missing):
                if other is None or isinstance(other, _Missing) or not self.missing_is_unknown:
                    return other is None or isinstance(other, _Missing)  # a missing argument is null
                return _unknown(f"{v.label} is missing")
        if is_number(a) or is_number(b):
            na, nb = read_number(a), read_number(b)
            if na is not None and nb is not None:
                return na == nb
            if isinstance(a, str) or isinstance(b, str):  # a string that says no number
                return _unreadable(a, la) if isinstance(a, str) else _unreadable(b, lb)
        if isinstance(a, bool) or isinstance(b, bool):
            return a is b
        return bool(a == b)

    def contains(self, container: Any, item: Any, lc: str, li: str) -> bool | _Unknown:
        for v in (container, item):
            if isinstance(v, _Missing):
                return _unknown(f"{v.label} is missing") if self.missing_is_unknown else False
        if isinstance(container, str):
            return isinstance(item, str) and item in container
        if isinstance(container, dict):
            return isinstance(item, str) and item in container
        if not isinstance(container, list):
            return False
        found = [self.equal(item, x, li, lc) for x in container]
        if True in found:
            return True
        unknown = [f for f in found if isinstance(f, _Unknown)]
        return _unknown(*unknown) if unknown else False


def decide(text: str, args: dict[str, Any], *, missing_is_unknown: bool = True) -> Verdict:
    """Whether the arguments satisfy the condition (an empty condition always holds): True, False, or
    None with why when it cannot be decided on them. `missing_is_unknown` False: a missing argument
    is null (a comparison with it is false), for conditions that may read arguments a call lacks."""
    if not text.strip():
        return Verdict(True)
    evaluation = _Evaluation(args if isinstance(args, dict) else {}, missing_is_unknown)
    result = evaluation.truth(evaluation.value(parse(text)))
    if isinstance(result, _Unknown):
        return Verdict(None, "; ".join(result.reasons))
    return Verdict(result)


def evaluate(text: str, args: dict[str, Any]) -> bool:
    """Whether the arguments surely satisfy the condition (a missing argument is null; what cannot be
    decided does not)."""
    return decide(text, args, missing_is_unknown=False).holds is True
