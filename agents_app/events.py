"""Live updates for conversations: group names and typed payloads.

Each notify_* sends the ids-only message to `session-<pk>` (the API's turn watchers and the ticket
page read the database on it) and has agents_app.fanout render the conversation page's fragment
once per audience and send it to the audience groups (pages forward it as it is)."""

from __future__ import annotations

import logging
from typing import Any, Literal, TypedDict

from adkweb.live import agroup_send, batched, group_send

logger = logging.getLogger(__name__)

# agents_app.fanout, registered by AgentsAppConfig.ready (it reads through selectors, which import the
# session store, which imports this module: a registration rather than an import cycle).
_fanout: Any = None


def register_fanout(module: Any) -> None:
    global _fanout
    _fanout = module


SESSIONS_GROUP = "sessions"  # every conversation list (status and last activity)


def session_group(session_pk: int) -> str:
    return f"session-{session_pk}"


class SessionEventMessage(TypedDict):
    type: Literal["session.event"]
    session_pk: int
    event_pk: int


class SessionPartialMessage(TypedDict):
    type: Literal["session.partial"]
    session_pk: int
    event_id: str
    author: str
    text: str
    turn_id: int
    event: dict  # the partial ADK event as REST JSON (invocationId, nodeInfo.path, ...)


class SessionStatusMessage(TypedDict):
    type: Literal["session.status"]
    session_pk: int


class TurnFinishedMessage(TypedDict):
    type: Literal["turn.finished"]
    session_pk: int
    turn_id: int
    status: str


class TurnRetriedMessage(TypedDict):
    type: Literal["turn.retried"]
    session_pk: int
    turn_id: int


@batched()
def notify_session_event(*, session_pk: int, event_pk: int) -> None:
    """A stored event: every open page of that conversation appends it."""
    group_send(
        session_group(session_pk), SessionEventMessage(type="session.event", session_pk=session_pk, event_pk=event_pk)
    )
    _quietly("publish_event", session_pk=session_pk, event_pk=event_pk)


def _quietly(publish: str, **kwargs: Any) -> None:
    """Rendering a live fragment must not fail the caller (it runs after commit): logged instead."""
    if _fanout is None:
        return
    try:
        getattr(_fanout, publish)(**kwargs)
    except Exception:
        logger.warning("Could not render the live fragment of %s %s.", publish, kwargs, exc_info=True)


async def anotify_partial(*, session_pk: int, event: dict, turn_id: int) -> None:
    """A streaming chunk (never stored): pages append it to the event with that id; API streams
    send the event as ADK gave it."""
    parts = (event.get("content") or {}).get("parts") or []
    message = SessionPartialMessage(
        type="session.partial",
        session_pk=session_pk,
        event_id=event.get("id", ""),
        author=event.get("author", ""),
        text="".join(p.get("text") or "" for p in parts if not p.get("thought")),
        turn_id=turn_id,
        event=event,
    )
    await agroup_send(session_group(session_pk), message)
    try:
        if _fanout is not None:
            await _fanout.apublish_partial(
                session_pk=session_pk,
                event_id=message["event_id"],
                author=message["author"],
                text=message["text"],
                turn_id=turn_id,
                event=event,
            )
    except Exception:
        logger.warning("Could not render a streaming chunk of session %s.", session_pk, exc_info=True)


@batched()
def notify_session_status(*, session_pk: int) -> None:
    """The conversation's status changed (running, waiting, idle, failed)."""
    msg = SessionStatusMessage(type="session.status", session_pk=session_pk)
    group_send(session_group(session_pk), msg)
    group_send(SESSIONS_GROUP, msg)
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


def notify_ticket_card(*, session_pk: int, ticket_id: int) -> None:
    """A ticket of this conversation changed (approvals.events sends the ids): its card on the pages."""
    _quietly("publish_ticket", session_pk=session_pk, ticket_id=ticket_id)
