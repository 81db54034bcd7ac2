"""Rows of long lists written in Python, byte for byte as their templates wrote them.

Django's template engine costs a few microseconds per variable, tag and filter; an inbox row has ~30
of them, so 25 rows were half of an inbox page's CPU (issue 12, target 4). The inbox's and the
conversation list's rows are built here instead, with Django's own functions for what the template
did (`value` is `{{ value }}`: the current time zone, localisation, autoescaping; the filters are
the template filters themselves), so the markup is the same; tests compare each row with the
template it replaces (tests/adkweb/test_markup.py).

Every value from the database goes through `value()` (escaped); only literal markup is not.
"""

from __future__ import annotations

from typing import Any

from django.template.defaultfilters import date as date_filter
from django.template.defaultfilters import timesince_filter, timeuntil_filter, truncatechars
from django.urls import reverse
from django.utils.formats import localize
from django.utils.html import conditional_escape, escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import template_localtime


def value(obj: Any) -> str:
    """`{{ obj }}` with autoescaping on: in the current time zone, localised, escaped."""
    if type(obj) is str:
        return escape(obj)
    obj = localize(template_localtime(obj))
    return conditional_escape(obj if isinstance(obj, str) else str(obj))


def date(obj: Any, fmt: str) -> str:
    """`{{ obj|date:fmt }}`."""
    return value(date_filter(template_localtime(obj), fmt))


def timesince(obj: Any) -> str:
    """`{{ obj|timesince }}`."""
    return value(timesince_filter(template_localtime(obj)))


def timeuntil(obj: Any) -> str:
    """`{{ obj|timeuntil }}`."""
    return value(timeuntil_filter(template_localtime(obj)))


def _oob(oob: Any) -> str:
    return f' hx-swap-oob="{value(oob)}"' if oob else ""


# -- the inbox (approvals/inbox.html#row) -----------------------------------------------------------
def inbox_row(ticket: Any, oob: Any = "") -> SafeString:
    """One inbox row: `ticket` an approvals.PendingCall with closed_by and assigned_to selected;
    `oob` an hx-swap-oob value for the sockets' rows."""
    from agents_app.timeline import ticket_summary
    from approvals.templatetags.approvals_tags import approval_count, tool_label

    pk, is_open = value(ticket.pk), ticket.is_open
    url = value(reverse("approvals:ticket", args=[ticket.pk]))
    created = ticket.created_at
    status = f'<span class="chip st-{value(ticket.status)}">{value(ticket.get_status_display())}</span>'
    if ticket.required_approvals > 1 and is_open:
        status += (
            f' <span class="quorum">{value(approval_count(ticket))} of {value(ticket.required_approvals)}'
            " approvals</span>"
        )
    if ticket.due_at and is_open:
        status += f' <span class="muted due">due in {timeuntil(ticket.due_at)}</span>'
    if ticket.closed_by:
        status += f' <span class="muted">by {value(ticket.closed_by.get_username())}</span>'
    elif ticket.assigned_to:
        status += f' <span class="muted">· {value(ticket.assigned_to.get_username())}</span>'
    disabled = "" if is_open else " disabled"
    return mark_safe(
        f'<tr id="pending-call-{pk}" class="row-{value(ticket.status)}{"" if is_open else " closed"}"{_oob(oob)}>\n'
        f'  <td class="sel"><input type="checkbox" name="ticket" value="{pk}" form="bulk-form"'
        f' aria-label="Select ticket #{pk}"{disabled}></td>\n'
        f'  <td data-label="#"><a href="{url}">#{pk}</a></td>\n'
        f'  <td data-label="Agent">{value(ticket.app_name)}</td>\n'
        f'  <td data-label="Tool"><code>{value(tool_label(ticket))}</code></td>\n'
        f'  <td data-label="Arguments"><a class="summary" href="{url}">'
        f"{value(ticket_summary(ticket) or '(no arguments)')}</a></td>\n"
        f'  <td data-label="Requester">{value(ticket.requester)}</td>\n'
        f'  <td data-label="Age"><time datetime="{date(created, "c")}" title="{value(created)}">'
        f"{timesince(created)}</time></td>\n"
        f'  <td data-label="Status">{status}</td>\n'
        "</tr>"
    )


# -- the conversation list (agents_app/session_list.html#session-row) -------------------------------
def session_row(s: Any, oob: Any = "") -> SafeString:
    """One row of the conversation list: `s` an agents_app.AdkSession (with its stored status)."""
    from agents_app.templatetags.conversation_tags import epoch, status_label

    when = epoch(s.update_time)
    url = value(reverse("agents_app:session-detail", args=[s.pk]))
    return mark_safe(
        f'<tr id="session-row-{value(s.pk)}"{_oob(oob)}>\n'
        f'  <td data-label="Agent"><a href="{url}">{value(s.app_name)}</a></td>\n'
        f'  <td data-label="User">{value(s.user_id)}</td>\n'
        f'  <td data-label="Status"><span class="chip act-{value(s.status)}">{value(status_label(s.status))}</span></td>\n'
        f'  <td data-label="Last activity"><time datetime="{date(when, "c")}" title="{date(when, "Y-m-d H:i:s T")}">'
        f"{timesince(when)} ago</time></td>\n"
        f'  <td data-label="Session" class="muted"><code>{value(truncatechars(s.session_id, 13))}</code></td>\n'
        "</tr>"
    )
