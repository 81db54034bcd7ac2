"""The live messages of a conversation: its group names and the typed payloads agents_app.events
sends to them (API followers, pages and the approvals consumers read them). Re-exported by
agents_app.events, where their senders are."""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

SESSIONS_GROUP = "sessions"  # every conversation list (status and last activity)


def session_group(session_pk: int) -> str:
    return f"session-{session_pk}"


class SessionEventMessage(TypedDict, total=False):
    type: Literal["session.event"]  # always there, as session_pk and event_pk
    session_pk: int
    event_pk: int
    # What an API follower (agents_app.api.watch) needs to answer without reading the database: the
    # session's revision after this event (one more than before it: a gap means a missed message),
    # the event's turn and author, and the stored event itself when it is small (EVENT_DATA_MAX: the
    # length of the JSON stored, which its writer checks, session_orm.NewEvent.message; not serialized
    # again here to be measured), as the JSON text stored (`data_json`: parsed by the follower that
    # takes it, not by the worker for every event; `data`, the parsed form, is what workers before it
    # sent).
    revision: int
    turn_id: int | None
    author: str
    data_json: str
    data: dict


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
    # A turn that ended DONE through the drain's statement (agents_app.turn_sql.done_next): the
    # session's revision after its last event, so that a follower that accounted for every revision
    # up to it answers without reading the database (agents_app.api.watch).
    revision: NotRequired[int]
    # Sent ahead of the turn's DONE (`anotify_turn_ended`): for API followers only; the DONE's own
    # `turn.finished` follows, as before.
    ahead: NotRequired[bool]


class TurnRetriedMessage(TypedDict):
    type: Literal["turn.retried"]
    session_pk: int
    turn_id: int


EVENT_DATA_MAX = 32_768  # characters of JSON: a bigger event is read from the database by its followers
