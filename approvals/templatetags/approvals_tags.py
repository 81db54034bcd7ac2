"""Readable renderings of ticket arguments, responses and events (model output is plain text)."""

from __future__ import annotations

from typing import Any

from django import template

from agents_app import timeline

register = template.Library()


@register.filter
def readable(value: Any, key: str = "") -> str:
    """One value as a person would write it: $200.00 for amounts, yes/no, lists joined."""
    return timeline.readable(value, key)


@register.filter
def args_summary(call: Any) -> str:
    """e.g. "meals · $200.00"; for a confirmation, what will run; for input, the question."""
    return timeline.ticket_summary(call)


@register.filter
def tool_label(call: Any) -> str:
    """The tool's name, or the pause kind for ADK's own pauses."""
    return call.tool_name if call.kind == "long_running" else call.kind


@register.filter
def pretty_json(value: Any) -> str:
    return timeline.pretty_json(value)


@register.filter
def items_readable(value: Any) -> list[tuple[str, str]]:
    """Key/value pairs of a dict as readable text, for a definition list."""
    if not isinstance(value, dict):
        return []
    return [(k, readable(v, k)) for k, v in value.items()]


@register.filter
def event_parts(data: Any) -> list[dict[str, Any]]:
    """The parts of a stored ADK event (snake_case or camelCase JSON) as text / call / response / error."""
    if not isinstance(data, dict):
        return []
    out: list[dict[str, Any]] = []
    content = data.get("content") or {}
    for part in content.get("parts") or []:
        if part.get("thought"):
            continue
        call = part.get("function_call") or part.get("functionCall")
        response = part.get("function_response") or part.get("functionResponse")
        if part.get("text"):
            out.append({"kind": "text", "text": part["text"]})
        elif call:
            out.append(
                {
                    "kind": "call",
                    "name": call.get("name", ""),
                    "id": call.get("id", ""),
                    "summary": timeline.summarize_values(call.get("args")),
                }
            )
        elif response:
            out.append(
                {
                    "kind": "response",
                    "name": response.get("name", ""),
                    "id": response.get("id", ""),
                    "summary": timeline.summarize_values(response.get("response")),
                }
            )
    error = data.get("error_message") or data.get("errorMessage")
    if error:
        out.append({"kind": "error", "text": error})
    return out
