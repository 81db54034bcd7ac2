"""Telling people about something, from any app: `notify("ticket.opened", ticket=ticket)`.

Call it inside the transaction that made the change. The notifications app registers the handler
at startup: it records the event in that transaction and sends emails and webhooks from Celery
after commit; it never raises into the caller. Without a handler (the app not installed), nothing
happens. Events: a ticket opened, decided or expired, a reminder or an escalation (approval
policies), a failed turn.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from adkweb.per_process import PerProcess

logger = logging.getLogger(__name__)

TICKET_OPENED = "ticket.opened"
TICKET_DECIDED = "ticket.decided"
TICKET_EXPIRED = "ticket.expired"
TICKET_REMINDER = "ticket.reminder"
TICKET_ESCALATED = "ticket.escalated"
TURN_FAILED = "turn.failed"
EVENTS = (TICKET_OPENED, TICKET_DECIDED, TICKET_EXPIRED, TICKET_REMINDER, TICKET_ESCALATED, TURN_FAILED)

Handler = Callable[..., None]
_handler: Handler | None = None


@dataclass(frozen=True)
class Outbox:
    """Where the handler records an event, for a caller that writes the record in its own SQL, in the
    statement that makes the change (approvals.ticket_rider: a ticket opened with its event): the
    table (columns name, ticket_id, data, created_at; the rest default) and what to call with each
    new row's id once it is committed (what the handler does after commit). `owes(event, ticket)`:
    False when the event provably owes nobody anything; the handler then records it as done (call
    `notify` for it), with no work after commit. `done`: the table's column (a timestamp) that records
    a row as done, for a caller that writes such an event's row in its own statement too (set to now,
    and nothing called after commit); empty: call `notify`. `owed_sql(event, ticket)` (PostgreSQL, with
    `done`): True when the event is owed, known without a query; else `owes`'s answer as an SQL condition
    and its parameters (true: owed), for the caller to ask in the statement that writes the row (the row
    then done unless it holds), where `owes` would read in a round trip of its own; None: ask `owes`."""

    table: str
    committed: Callable[[int], None]
    owes: Callable[[str, Any], bool] = lambda event, ticket: True
    done: str = ""
    owed_sql: Callable[[str, Any], bool | tuple[str, list[Any]]] | None = None


_outbox: Outbox | None = None


# The thread that runs `committed_soon`'s work (a forked child has its parent's executor object but
# not its thread: it makes its own).
_sender = PerProcess(lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="adkweb-outbox"))


def committed_soon(outbox: Outbox, row_id: int) -> None:
    """`outbox.committed(row_id)` on a thread of this process's, not waited for: from an event loop,
    whose caller should not wait on a thread for a task's enqueue. An outbox row stays owed until its
    work is done, so nothing is lost if this fails or the process dies first: the handler's sweeper
    sends it (notifications.services.notifications_sweep, from beat every 15 s)."""
    try:
        _sender.get().submit(outbox.committed, row_id)
    except RuntimeError:  # the interpreter is shutting down
        logger.warning("Could not send the work of outbox row %s; the sweeper will.", row_id)


def register(handler: Handler, outbox: Outbox | None = None) -> None:
    """Install the one handler (notifications.services.notify does this in its AppConfig.ready)."""
    global _handler, _outbox
    _handler, _outbox = handler, outbox


def outbox() -> Outbox | None:
    """The handler's outbox, if it has one (None: call `notify`)."""
    return _outbox if _handler is not None else None


def notify(event: str, *, ticket: Any = None, turn: Any = None, data: dict[str, Any] | None = None) -> None:
    """Tell the people concerned about an event; an unknown event name is a programming error."""
    if event not in EVENTS:
        raise ValueError(f"Unknown notification event {event!r}; use one of {', '.join(EVENTS)}.")
    if _handler is not None:
        _handler(event, ticket=ticket, turn=turn, data=data)
