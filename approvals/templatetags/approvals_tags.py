"""Readable renderings of tickets, their arguments and responses (model output is plain text)."""

from __future__ import annotations

from typing import Any

from django import template

from adkweb import paging
from agents_app import summaries

register = template.Library()


@register.filter
def count_label(count: int, noun: str) -> str:
    """ "3 tickets", "1,000+ tickets" (counts are capped: adkweb.paging)."""
    return paging.count_label(count, noun)


@register.filter
def count_badge(count: int | None) -> str:
    """The nav badge: the open-ticket count, "1,000+" past the cap."""
    if count is None:
        return ""
    return f"{paging.COUNT_CAP:,}+" if count > paging.COUNT_CAP else str(count)


@register.filter
def readable(value: Any, key: str = "") -> str:
    """One value as a person would write it: $200.00 for amounts, yes/no, lists joined."""
    return summaries.readable(value, key)


@register.filter
def args_summary(ticket: Any) -> str:
    """e.g. "meals · $200.00"; for a confirmation, what will run; for input, the question. The arguments
    an approval approves now: an approver's edit, marked by `edit_note`."""
    return summaries.ticket_summary(ticket)


@register.filter
def edit_note(ticket: Any, limit: int = 200) -> str:
    """ "edited by ann: amount $200.00 → $150.00" when an approver edited the arguments, else ""."""
    from approvals.edits import edit_note as note

    return note(ticket, limit)


@register.filter
def decision_edit(response: Any, ticket: Any = None) -> str:
    """What a decision's edit of the arguments changed against the agent's ("amount $200.00 → $150.00"),
    or "" for a decision that edited nothing. `ticket`: the response's, when it is not loaded with it."""
    if response.edited_args is None:
        return ""
    from approvals.edits import changes_text

    return changes_text((ticket or response.pending_call).tool_args, response.edited_args)


@register.filter
def tool_label(ticket: Any) -> str:
    """The tool's name, or the pause kind for ADK's own pauses."""
    from approvals.rows import tool_label as label

    return label(ticket)


@register.filter
def pretty_json(value: Any) -> str:
    return summaries.pretty_json(value)


@register.filter
def items_readable(value: Any) -> list[tuple[str, str]]:
    """Key/value pairs of a dict as readable text, for a definition list."""
    if not isinstance(value, dict):
        return []
    return [(k, readable(v, k)) for k, v in value.items()]


@register.filter
def args_diff_rows(ticket: Any) -> list[tuple[str, str, str, bool]]:
    """(argument, original, edited, changed) for every argument of an edited ticket, readable."""
    original, edited = ticket.tool_args, ticket.edited_args or {}
    names = list(original) + [k for k in edited if k not in original]
    rows = []
    for k in names:
        before = readable(original[k], k) if k in original else "(none)"
        after = readable(edited[k], k) if k in edited else "(removed)"
        rows.append((k, before, after, original.get(k) != edited.get(k) or (k in original) != (k in edited)))
    return rows


@register.filter
def duration(seconds: int | None) -> str:
    """3600 → "1 hour"; 5400 → "1h 30m"."""
    from approvals.policy_forms import format_duration
    from approvals.rules import humanize_seconds

    if not seconds:
        return ""
    text = humanize_seconds(seconds)
    return text if not text.endswith(("seconds", "second")) or seconds < 60 else format_duration(seconds)


@register.filter
def split_words(text: str) -> list[str]:
    return text.split()


@register.filter
def field(form: Any, name: str) -> Any:
    """A form's bound field by name (templates cannot index by a variable)."""
    return form[name]


@register.filter
def approval_count(ticket: Any) -> int:
    """How many approvals count now toward a quorum ticket (one query; only asked for those)."""
    from approvals.selectors import ticket_approvals

    return len(ticket_approvals(ticket=ticket))


@register.filter
def approval_counted(response: Any) -> bool | None:
    """On the audit page: whether a held approval counted when its ticket closed (approvals.audit)."""
    from approvals.audit import approval_counted as counted

    return counted(response)


@register.simple_tag
def inbox_row(ticket: Any, oob: Any = "") -> str:
    """An inbox row (adkweb.markup: written in Python, as the template wrote it)."""
    from approvals.rows import inbox_row as row

    return row(ticket, oob)
