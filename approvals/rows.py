"""The inbox's row (approvals/inbox.html#row) written in Python, as the template wrote it (adkweb.markup)."""

from __future__ import annotations

import functools
from typing import Any

from django.utils.encoding import force_str
from django.utils.safestring import SafeString, mark_safe

from adkweb.markup import date, oob_attr, timesince, timeuntil, url_for_pk, value


def inbox_row(ticket: Any, oob: Any = "") -> SafeString:
    """One inbox row: `ticket` an approvals.PendingCall with closed_by, assigned_to and edited_by selected;
    `oob` an hx-swap-oob value for the sockets' rows. Its arguments are those an approval approves now,
    an approver's edit marked (who, what it changed)."""
    from agents_app.summaries import ticket_summary

    from .edits import edit_note
    from .selectors import ticket_approvals

    pk, is_open = value(ticket.pk), ticket.is_open
    url = value(url_for_pk("approvals:ticket", ticket.pk))
    created = ticket.created_at
    label = force_str(_status_labels().get(ticket.status, ticket.status), strings_only=True)  # get_status_display()
    status = f'<span class="chip st-{value(ticket.status)}">{value(label)}</span>'
    if ticket.required_approvals > 1 and is_open:
        status += (
            f' <span class="quorum">{value(len(ticket_approvals(ticket=ticket)))} of {value(ticket.required_approvals)}'
            " approvals</span>"
        )
    if ticket.past_due:  # by the clock, before the deadline sweep expires it
        status += ' <span class="due past-due">past due: it expires</span>'
    elif ticket.due_at and is_open:
        due = ticket.due_at
        status += (
            f' <span class="muted due">due in <time datetime="{date(due, "c")}" title="{value(due)}" data-rel="until">'
            f"{timeuntil(due)}</time></span>"
        )
    if ticket.closed_by_label:
        status += f' <span class="muted">by {value(ticket.closed_by_label)}</span>'
    elif ticket.assigned_to:
        status += f' <span class="muted">· {value(ticket.assigned_to.get_username())}</span>'
    disabled = "" if is_open else " disabled"
    return mark_safe(
        f'<tr id="pending-call-{pk}" class="row-{value(ticket.status)}{"" if is_open else " closed"}"{oob_attr(oob)}>\n'
        f'  <td class="sel"><input type="checkbox" name="ticket" value="{pk}" form="bulk-form"'
        f' aria-label="Select ticket #{pk}"{disabled}></td>\n'
        f'  <td data-label="#"><a href="{url}">#{pk}</a></td>\n'
        f'  <td data-label="Agent">{value(ticket.app_name)}</td>\n'
        f'  <td data-label="Tool"><code>{value(tool_label(ticket))}</code></td>\n'
        f'  <td data-label="Arguments"><a class="summary" href="{url}">'
        f"{value(ticket_summary(ticket) or '(no arguments)')}</a>{_edited(edit_note(ticket, 120))}</td>\n"
        f'  <td data-label="Requester">{value(ticket.requester)}</td>\n'
        f'  <td data-label="Age"><time datetime="{date(created, "c")}" title="{value(created)}" data-rel="since">'
        f"{timesince(created)}</time></td>\n"
        f'  <td data-label="Status">{status}</td>\n'
        "</tr>"
    )


def _edited(note: str) -> str:
    return f' <small class="edited">{value(note)}</small>' if note else ""


@functools.cache
def _status_labels() -> dict[Any, Any]:
    from .models import PendingCall

    return dict(PendingCall._meta.get_field("status").flatchoices)


def tool_label(ticket: Any) -> str:
    """The tool's name, or the pause kind for ADK's own pauses (the `tool_label` filter)."""
    return ticket.tool_name if ticket.kind == "long_running" else ticket.kind
