"""The parser of approvals.conditions' expression language: text to a tree of Nodes.

A hand-written recursive-descent parser over a regular-expression tokenizer, bounded in length
(MAX_LENGTH) and nesting (MAX_DEPTH); calls only to the FUNCTIONS listed here. Every error is a
ConditionError whose message says what is wrong and where. approvals.conditions is the public side
(validate, names, evaluate); this module is its grammar.
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


def is_number(v: Any) -> bool:
    """A finite int or float (not a bool): what compares as a number."""
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


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
            if inner.kind != "lit" or not is_number(inner.value):
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
