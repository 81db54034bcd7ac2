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
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

MAX_LENGTH = 1000
MAX_DEPTH = 40
TOKEN = re.compile(
    r"""\s*(?:
      (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
    | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
    | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
    | (?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,|\.|-)
    )""",
    re.VERBOSE,
)
KEYWORDS = {"and", "or", "not", "in", "true", "false", "null"}
COMPARISONS = {"==", "!=", "<", "<=", ">", ">=", "in", "not in"}


def _lower(v: Any) -> Any:
    return v.lower() if isinstance(v, str) else v


def _upper(v: Any) -> Any:
    return v.upper() if isinstance(v, str) else v


def _len(v: Any) -> Any:
    return len(v) if isinstance(v, str | list | dict) else None


FUNCTIONS: dict[str, Callable[[Any], Any]] = {"lower": _lower, "upper": _upper, "len": _len}


class ConditionError(ValueError):
    """A condition that does not parse; the message says what and where."""


@dataclass(frozen=True)
class Node:
    kind: str  # "lit", "var", "list", "not", "and", "or", "cmp", "call", "neg"
    value: Any = None
    children: tuple[Node, ...] = ()


def _tokens(text: str) -> list[tuple[str, Any, int]]:
    out: list[tuple[str, Any, int]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = TOKEN.match(text, pos)
        if not m or m.end() == pos:
            at = len(text) - len(text[pos:].lstrip())
            raise ConditionError(f"Unexpected character {text[at]!r} at position {at + 1}.")
        start = m.start(m.lastgroup or 0)
        kind, raw = m.lastgroup or "", m.group(m.lastgroup or 0)
        if kind == "number":
            out.append(("lit", float(raw) if any(c in raw for c in ".eE") else int(raw), start))
        elif kind == "string":
            out.append(("lit", re.sub(r"\\(.)", r"\1", raw[1:-1]), start))
        elif kind == "name" and raw in KEYWORDS:
            literal = {"true": True, "false": False, "null": None}
            out.append(("lit", literal[raw], start) if raw in literal else ("op", raw, start))
        else:
            out.append((kind, raw, start))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.i = 0
        self.depth = 0

    def peek(self, offset: int = 0) -> tuple[str, Any, int] | None:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else None

    def is_op(self, value: str, offset: int = 0) -> bool:
        tok = self.peek(offset)
        return tok is not None and tok[0] == "op" and tok[1] == value

    def expect(self, value: str) -> None:
        if not self.is_op(value):
            raise ConditionError(f"Expected {value!r} {self.where()}.")
        self.i += 1

    def where(self) -> str:
        tok = self.peek()
        return f"at position {tok[2] + 1} (found {tok[1]!r})" if tok else "at the end of the condition"

    def parse(self) -> Node:
        if not self.tokens:
            raise ConditionError("The condition is empty.")
        node = self.or_()
        if self.peek() is not None:
            raise ConditionError(f"Unexpected {self.peek()[1]!r} {self.where()}: expected 'and', 'or' or the end.")  # type: ignore[index]
        return node

    def nested(self, parse: Callable[[], Node]) -> Node:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ConditionError(f"The condition is nested more than {MAX_DEPTH} levels deep.")
        try:
            return parse()
        finally:
            self.depth -= 1

    def or_(self) -> Node:
        node = self.and_()
        while self.is_op("or"):
            self.i += 1
            node = Node("or", children=(node, self.and_()))
        return node

    def and_(self) -> Node:
        node = self.not_()
        while self.is_op("and"):
            self.i += 1
            node = Node("and", children=(node, self.not_()))
        return node

    def not_(self) -> Node:
        if self.is_op("not"):
            self.i += 1
            return Node("not", children=(self.nested(self.not_),))
        return self.comparison()

    def comparison(self) -> Node:
        left = self.operand()
        op = None
        if self.is_op("not") and self.is_op("in", 1):
            self.i += 2
            op = "not in"
        else:
            tok = self.peek()
            if tok is not None and tok[0] == "op" and tok[1] in COMPARISONS:
                self.i += 1
                op = tok[1]
        if op is None:
            return left
        node = Node("cmp", op, (left, self.operand()))
        tok = self.peek()
        if tok is not None and tok[0] == "op" and tok[1] in COMPARISONS:
            raise ConditionError(f"Chained comparisons are not supported {self.where()}: join them with 'and'.")
        return node

    def operand(self) -> Node:
        tok = self.peek()
        if tok is None:
            raise ConditionError("The condition ends where a value was expected.")
        kind, value, _ = tok
        if kind == "lit":
            self.i += 1
            return Node("lit", value)
        if self.is_op("-"):
            self.i += 1
            inner = self.operand()
            if inner.kind != "lit" or not _is_number(inner.value):
                raise ConditionError("'-' goes before a number only.")
            return Node("lit", -inner.value)
        if self.is_op("("):
            self.i += 1
            inner = self.nested(self.or_)
            if self.is_op(","):
                return self.sequence(first=inner, close=")")
            self.expect(")")
            return inner
        if self.is_op("["):
            self.i += 1
            return self.sequence(first=None, close="]")
        if kind == "name":
            self.i += 1
            if self.is_op("("):
                return self.call(value)
            return self.path(Node("var", value))
        raise ConditionError(f"Expected a value {self.where()}.")

    def sequence(self, *, first: Node | None, close: str) -> Node:
        items = [] if first is None else [first]
        if first is not None:
            self.expect(",")
        while not self.is_op(close):
            items.append(self.nested(self.operand))
            if not self.is_op(close):
                self.expect(",")
        self.i += 1
        return Node("list", children=tuple(items))

    def call(self, name: str) -> Node:
        if name not in FUNCTIONS:
            raise ConditionError(f"Unknown function {name!r}; use one of: {', '.join(sorted(FUNCTIONS))}.")
        self.expect("(")
        arg = self.nested(self.or_)
        self.expect(")")
        return Node("call", name, (arg,))

    def path(self, node: Node) -> Node:
        while True:
            if self.is_op("."):
                self.i += 1
                tok = self.peek()
                if tok is None or tok[0] != "name":
                    raise ConditionError(f"Expected a field name after '.' {self.where()}.")
                self.i += 1
                node = Node("get", tok[1], (node,))
            elif self.is_op("["):
                self.i += 1
                tok = self.peek()
                if tok is None or tok[0] != "lit" or not isinstance(tok[1], str | int) or isinstance(tok[1], bool):
                    raise ConditionError(f"Expected a quoted key or an index inside [...] {self.where()}.")
                self.i += 1
                self.expect("]")
                node = Node("get", tok[1], (node,))
            else:
                return node


def parse(text: str) -> Node:
    """The condition's tree, or ConditionError saying what is wrong."""
    if len(text) > MAX_LENGTH:
        raise ConditionError(f"The condition is longer than {MAX_LENGTH} characters.")
    return _Parser(text).parse()


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
def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _as_number(v: Any) -> float | None:
    if _is_number(v):
        return float(v)
    if isinstance(v, str):
        try:
            n = float(v.strip())
        except ValueError:
            return None
        return n if math.isfinite(n) else None
    return None


def _comparable(a: Any, b: Any) -> tuple[Any, Any] | None:
    if _is_number(a) or _is_number(b):
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
