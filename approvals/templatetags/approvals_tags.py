"""Readable renderings of tickets, their arguments and responses (model output is plain text)."""

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
def args_summary(ticket: Any) -> str:
    """e.g. "meals · $200.00"; for a confirmation, what will run; for input, the question."""
    return timeline.ticket_summary(ticket)


@register.filter
def tool_label(ticket: Any) -> str:
    """The tool's name, or the pause kind for ADK's own pauses."""
    return ticket.tool_name if ticket.kind == "long_running" else ticket.kind


@register.filter
def pretty_json(value: Any) -> str:
    return timeline.pretty_json(value)


@register.filter
def items_readable(value: Any) -> list[tuple[str, str]]:
    """Key/value pairs of a dict as readable text, for a definition list."""
    if not isinstance(value, dict):
        return []
    return [(k, readable(v, k)) for k, v in value.items()]
