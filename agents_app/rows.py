"""A row of the conversation list (agents_app/session_list.html#session-row) written in Python, as the
template wrote it (adkweb.markup)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.template.defaultfilters import truncatechars
from django.utils.safestring import SafeString, mark_safe

from adkweb.markup import date, oob_attr, timesince, url_for_pk, value


def session_row(s: Any, oob: Any = "") -> SafeString:
    """One row of the conversation list: `s` an agents_app.AdkSession (with its stored status)."""
    from .selectors import SESSION_STATUSES

    when = epoch(s.update_time)
    url = value(url_for_pk("agents_app:session-detail", s.pk))
    return mark_safe(
        f'<tr id="session-row-{value(s.pk)}"{oob_attr(oob)}>\n'
        f'  <td data-label="Agent"><a href="{url}">{value(s.app_name)}</a></td>\n'
        f'  <td data-label="User">{value(s.user_id)}</td>\n'
        f'  <td data-label="Status"><span class="chip act-{value(s.status)}">'
        f"{value(SESSION_STATUSES.get(s.status, s.status))}</span></td>\n"
        f'  <td data-label="Last activity"><time datetime="{date(when, "c")}" title="{date(when, "Y-m-d H:i:s T")}"'
        ' data-rel="ago">'
        f"{timesince(when)} ago</time></td>\n"
        f'  <td data-label="Session" class="muted"><code>{value(truncatechars(s.session_id, 13))}</code></td>\n'
        "</tr>"
    )


def epoch(value_: Any) -> datetime | None:
    """A float UNIX timestamp (ADK's time fields) as an aware datetime (the `epoch` filter)."""
    try:
        return datetime.fromtimestamp(float(value_), tz=UTC)
    except (TypeError, ValueError):
        return None


def rows_seen(sessions: Iterable[Any]) -> str:
    """What a page of the list shows of its rows (which, in what order, each one's status and last activity),
    short: its socket says it (`seen=`), and sends the rows again when its own read of the page differs."""
    shown = ";".join(f"{s.pk}:{s.status}:{s.update_time!r}" for s in sessions)
    return hashlib.blake2b(shown.encode(), digest_size=8).hexdigest()
