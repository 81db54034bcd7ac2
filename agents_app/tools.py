"""The code tool registry: plain Python functions registered by name as ADK tools.

    from agents_app.tools import registry

    @registry.tool
    def get_weather(city: str) -> dict: ...

    @registry.long_running
    def ask_for_approval(purpose: str, amount: float) -> dict: ...

    @registry.tool(require_confirmation=True)
    def transfer_money(amount: float, recipient: str) -> dict: ...

Admin-configured agents refer to tools by these names.

A tool with an external side effect (a payment, an email) passes `idempotency_key(tool_context)`
to the system it calls: the key is the same for every execution of one tool call, including a
re-execution after a worker crash, so that system can refuse the duplicate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Confirmation = bool | Callable[..., bool]


def idempotency_key(tool_context: Any) -> str:
    """A stable key for this tool call: the same for every execution of it (a run resumed after a
    crash replays a stored call under its stored id), different for every other call."""
    session = tool_context.session
    call_id = tool_context.function_call_id
    if not call_id:
        raise ValueError("idempotency_key needs the ToolContext of a function call.")
    raw = "\x1f".join((session.app_name, session.user_id, session.id, call_id))
    return "adkweb-" + hashlib.sha256(raw.encode()).hexdigest()[:40]


@dataclass(frozen=True)
class RegisteredTool:
    name: str
    func: Callable[..., Any] | None  # None for a ready ADK tool object (adk_tool)
    long_running: bool = False
    require_confirmation: Confirmation = False
    adk_tool: Any = None  # a ready ADK tool object (e.g. ADK's own request_input)

    def build(self) -> Any:
        """A fresh ADK tool object for this function."""
        from google.adk.tools import FunctionTool, LongRunningFunctionTool

        if self.adk_tool is not None or self.func is None:
            return self.adk_tool
        if self.long_running:
            return LongRunningFunctionTool(func=self.func)
        return FunctionTool(func=self.func, require_confirmation=self.require_confirmation)

    def declaration(self) -> dict[str, Any]:
        """The FunctionDeclaration the model sees, exactly as ADK builds it, as JSON."""
        decl = self.build()._get_declaration()
        return decl.model_dump(mode="json", exclude_none=True) if decl else {}

    @property
    def kind(self) -> str:
        if self.long_running:
            return "long-running"
        if self.require_confirmation:
            return "needs confirmation"
        return "function"


class ToolRegistry:
    def __init__(self) -> None:
        self._tools: dict[str, RegisteredTool] = {}

    def register(
        self,
        func: Callable[..., Any],
        *,
        name: str | None = None,
        long_running: bool = False,
        require_confirmation: Confirmation = False,
    ) -> Callable[..., Any]:
        tool_name = name or func.__name__
        existing = self._tools.get(tool_name)
        if existing and existing.func is not func and getattr(existing.func, "__qualname__", None) != func.__qualname__:
            raise ValueError(f"A different tool is already registered as {tool_name!r}.")
        self._tools[tool_name] = RegisteredTool(tool_name, func, long_running, require_confirmation)
        return func

    def tool(self, func: Callable[..., Any] | None = None, *, require_confirmation: Confirmation = False):
        """Register a function tool (optionally one that needs ADK tool confirmation)."""
        if func is not None:
            return self.register(func)
        return lambda f: self.register(f, require_confirmation=require_confirmation)

    def long_running(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Register a long-running function tool: the agent pauses until a response comes back."""
        return self.register(func, long_running=True)

    def register_adk_tool(self, tool: Any) -> None:
        """Register a ready ADK tool object (ADK's built-in pauses) under its own name."""
        self._tools[tool.name] = RegisteredTool(
            tool.name, getattr(tool, "func", None), bool(getattr(tool, "is_long_running", False)), False, tool
        )

    def get(self, name: str) -> RegisteredTool:
        try:
            return self._tools[name]
        except KeyError:
            raise KeyError(f"No tool named {name!r} is registered.") from None

    def names(self) -> list[str]:
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def all(self) -> list[RegisteredTool]:
        return [self._tools[n] for n in self.names()]


registry = ToolRegistry()
