"""Live updates for conversations sent from a thread, after a commit (the ORM's paths: agents_app.services,
turn_close, approvals' events): each notify_* sends the ids-only message to `session-<pk>` and has
agents_app.fanout render the pages' fragments (`_quietly`). With what agents_app.events' async ones
share: the fan-out's registration (`_fanout`), the event's message (`_event_message`) and its row as
its writer has it (`_stored`). Split out of agents_app.events, which imports them back (callers and
tests read them there).
"""

from __future__ import annotations

import json
import logging
from typing import Any

from adkweb.live import batched, group_send, group_send_each

from .event_messages import (
    SESSIONS_GROUP,
    SessionEventMessage,
    SessionStatusMessage,
    TurnFinishedMessage,
    TurnRetriedMessage,
    session_group,
)

logger = logging.getLogger("agents_app.events")  # the log name, as before the split

# agents_app.fanout, registered by AgentsAppConfig.ready (it reads through selectors, which import the
# session store, which imports this module: a registration rather than an import cycle).
_fanout: Any = None


def register_fanout(module: Any) -> None:
    global _fanout
    _fanout = module


@batched()
def notify_session_event(
    *,
    session_pk: int,
    event_pk: int,
    revision: int | None = None,
    turn_id: int | None = None,
    author: str = "",
    data_json: str | None = None,
    timestamp: float | None = None,
) -> None:
    """A stored event: every open page of that conversation appends it; API followers of its turn
    take it from the message (`revision`, `turn_id`, `author`, `data_json`) when it carries them. With
    `data_json` and `timestamp` (what was stored), the pages' fragment is rendered without reading the
    row back."""
    group_send(session_group(session_pk), _event_message(session_pk, event_pk, revision, turn_id, author, data_json))
    stored = _stored(session_pk, event_pk, data_json, timestamp)
    _quietly("publish_event", session_pk=session_pk, event_pk=event_pk, stored=stored)


def _event_message(
    session_pk: int, event_pk: int, revision: int | None, turn_id: int | None, author: str, data_json: str | None
) -> SessionEventMessage:
    message = SessionEventMessage(type="session.event", session_pk=session_pk, event_pk=event_pk)
    if revision is not None:
        message["revision"], message["turn_id"], message["author"] = revision, turn_id, author
        if data_json is not None and turn_id is not None and author != "user":  # its size checked by its writer
            message["data_json"] = data_json
    return message


def _stored(session_pk: int, event_pk: int, data_json: str | None, timestamp: float | None) -> Any:
    """The stored row as its writer has it in memory (unsaved: the view's fields only), or None."""
    if data_json is None or timestamp is None:
        return None
    from .models import StoredEvent

    return StoredEvent(pk=event_pk, session_id=session_pk, timestamp=timestamp, data=json.loads(data_json))


def _quietly(publish: str, **kwargs: Any) -> None:
    """Rendering a live fragment must not fail the caller (it runs after commit): logged instead."""
    if _fanout is None:
        return
    try:
        getattr(_fanout, publish)(**kwargs)
    except Exception:
        logger.warning("Could not render the live fragment of %s %s.", publish, kwargs, exc_info=True)


@batched()
def notify_session_status(*, session_pk: int) -> None:
    """The conversation's status changed (running, waiting, idle, failed)."""
    msg = SessionStatusMessage(type="session.status", session_pk=session_pk)
    group_send_each([session_group(session_pk), SESSIONS_GROUP], msg)
    _quietly("publish_status", session_pk=session_pk)


@batched()
def notify_turn_finished(*, session_pk: int, turn_id: int, status: str) -> None:
    group_send(
        session_group(session_pk),
        TurnFinishedMessage(type="turn.finished", session_pk=session_pk, turn_id=turn_id, status=status),
    )
    _quietly("publish_turn_finished", session_pk=session_pk, turn_id=turn_id, status=status)


@batched()
def notify_turn_retried(*, session_pk: int, turn_id: int) -> None:
    """A failed turn was queued again: pages drop its error line."""
    group_send(
        session_group(session_pk), TurnRetriedMessage(type="turn.retried", session_pk=session_pk, turn_id=turn_id)
    )
    _quietly("publish_turn_retried", session_pk=session_pk, turn_id=turn_id)


def ticket_card_groups(session_pk: int) -> list[str]:
    """The groups `notify_ticket_card` publishes to (to ask the layer about them ahead, in one go)."""
    if _fanout is None:
        return []
    return [_fanout.audience_group(session_pk, a) for a in _fanout.AUDIENCES]


def notify_ticket_card(*, session_pk: int, ticket_id: int) -> None:
    """A ticket of this conversation changed (approvals.events sends the ids): its card on the pages."""
    _quietly("publish_ticket", session_pk=session_pk, ticket_id=ticket_id)
