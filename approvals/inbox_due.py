"""An inbox row's due time, live: a row says "due in …" until its open ticket's due time, then "past due: it
expires" (approvals.rows), before the deadline sweep expires it. A row pushed to the inbox sockets carries
the due time it counts down to (approvals.fanout); each socket keeps those of the rows on its page and one
timer for the nearest (approvals.consumers), at which it pushes those rows again, read now."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.template.loader import render_to_string

REUSED_FOR = 2.0  # seconds a row read at its due time serves the other sockets of the process that show it
_read: dict[tuple[int, float], tuple[float, str]] = {}
_read_lock = threading.Lock()


def row_due(ticket: Any) -> float | None:
    """The due time (time.time()) the ticket's row counts down to: None if it has none, is closed, or
    says past due already."""
    return ticket.due_at.timestamp() if ticket.due_at is not None and ticket.is_open and not ticket.past_due else None


def pushed_row(ticket: Any) -> str:
    """The ticket's inbox row as the sockets push it: in place of the one on the page (its id)."""
    return render_to_string("approvals/inbox.html#row", {"ticket": ticket, "oob": "outerHTML"}).strip()


def rows_at_due(due: dict[int, float]) -> list[str]:
    """The rows of these tickets (id: the due time reached) read now. A row read at its due time serves
    every socket of this process that shows it, for REUSED_FOR seconds (sockets whose timers fire together):
    a change to the ticket after it is pushed to each socket after this row, in order."""
    from . import selectors

    now = time.monotonic()
    rows = []
    for ticket_id, at in sorted(due.items()):
        with _read_lock:
            found = _read.get((ticket_id, at))
        if found is not None and now - found[0] < REUSED_FOR:
            rows.append(found[1])
            continue
        ticket = selectors.ticket_get(ticket_id=ticket_id)
        if ticket is None:
            continue
        row = pushed_row(selectors.approvals_attach([ticket])[0])
        with _read_lock:
            for key in [k for k, (read_at, _) in _read.items() if now - read_at >= REUSED_FOR]:
                del _read[key]
            _read[(ticket_id, at)] = (now, row)
        rows.append(row)
    return rows
