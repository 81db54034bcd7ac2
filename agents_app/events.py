"""Live updates for conversations: group names and typed payloads (ids only; consumers render)."""

from __future__ import annotations

from typing import Literal, TypedDict

from adkweb.live import agroup_send, group_send

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


def notify_session_event(*, session_pk: int, event_pk: int) -> None:
    """A stored event: every open page of that conversation appends it."""
    group_send(
        session_group(session_pk), SessionEventMessage(type="session.event", session_pk=session_pk, event_pk=event_pk)
    )


async def anotify_partial(*, session_pk: int, event: dict, turn_id: int) -> None:
    """A streaming chunk (never stored): pages append it to the event with that id; API streams
    send the event as ADK gave it."""
    parts = (event.get("content") or {}).get("parts") or []
    await agroup_send(
        session_group(session_pk),
        SessionPartialMessage(
            type="session.partial",
            session_pk=session_pk,
            event_id=event.get("id", ""),
            author=event.get("author", ""),
            text="".join(p.get("text") or "" for p in parts if not p.get("thought")),
            turn_id=turn_id,
            event=event,
        ),
    )


def notify_session_status(*, session_pk: int) -> None:
    """The conversation's status changed (running, waiting, idle, failed)."""
    msg = SessionStatusMessage(type="session.status", session_pk=session_pk)
    group_send(session_group(session_pk), msg)
    group_send(SESSIONS_GROUP, msg)


def notify_turn_finished(*, session_pk: int, turn_id: int, status: str) -> None:
    group_send(
        session_group(session_pk),
        TurnFinishedMessage(type="turn.finished", session_pk=session_pk, turn_id=turn_id, status=status),
    )


def notify_turn_retried(*, session_pk: int, turn_id: int) -> None:
    """A failed turn was queued again: pages drop its error line."""
    group_send(
        session_group(session_pk), TurnRetriedMessage(type="turn.retried", session_pk=session_pk, turn_id=turn_id)
    )
