"""Reads on the agent side: conversation lists, timelines of stored events, agent cards.

Event views are plain dataclasses built from the stored ADK event JSON, so templates (and the
consumers that render the same partials) never parse JSON themselves.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone as dt_timezone
from typing import Any, Iterable, Optional

from django.db.models import Case, CharField, Exists, OuterRef, QuerySet, Subquery, Value, When

from .models import AdkSession, StoredEvent, Turn

ACTIVE_TURN_STATUSES = (Turn.Status.QUEUED, Turn.Status.RUNNING)
SESSION_STATUSES = {
    "running": "running",
    "waiting": "waiting for a human",
    "failed": "failed",
    "idle": "idle",
}
_DOM_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def event_dom_id(event_id: str) -> str:
    """A stable DOM id for an ADK event id (streaming chunks and the final event share it)."""
    return "event-" + _DOM_UNSAFE.sub("_", event_id or "unknown")


def _dt(ts: Optional[float]) -> Optional[datetime]:
    return datetime.fromtimestamp(ts, tz=dt_timezone.utc) if ts else None


def summarize(value: Any, limit: int = 120) -> str:
    """A one-line human summary of a JSON value ("purpose: meals · amount: 200")."""
    if isinstance(value, dict):
        text = " · ".join(f"{k}: {summarize(v, 40)}" for k, v in value.items())
    elif isinstance(value, list):
        text = ", ".join(summarize(v, 40) for v in value)
    elif value is None:
        text = "—"
    else:
        text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


# -- one stored event, readable -----------------------------------------------------------------
@dataclass
class EventItem:
    kind: str  # text | call | response | code | other
    text: str = ""
    name: str = ""
    call_id: str = ""
    data: Any = None  # args of a call, response of a response
    long_running: bool = False
    thought: bool = False
    ticket: Any = None  # approvals.PendingCall for a long-running call, when one exists

    @property
    def summary(self) -> str:
        return summarize(self.data)

    @property
    def raw(self) -> str:
        return pretty_json(self.data)


@dataclass
class EventView:
    event_id: str
    author: str
    items: list[EventItem] = field(default_factory=list)
    pk: Optional[int] = None
    timestamp: Optional[datetime] = None
    error_code: str = ""
    error_message: str = ""
    streaming: bool = False
    raw_data: Any = None

    @property
    def dom_id(self) -> str:
        return event_dom_id(self.event_id)

    @property
    def is_user(self) -> bool:
        return self.author == "user"

    @property
    def is_error(self) -> bool:
        return bool(self.error_code or self.error_message)

    @property
    def raw(self) -> str:
        return pretty_json(self.raw_data)


def event_view(stored: StoredEvent, tickets: Optional[dict[str, Any]] = None) -> EventView:
    """A readable view of one stored event; `tickets` maps call id -> PendingCall (else queried)."""
    from .session_service import event_from_json

    event = event_from_json(stored.data)
    long_running = set(event.long_running_tool_ids or ())
    if tickets is None and long_running:
        tickets = tickets_by_call_id(stored.session_id, call_ids=long_running)
    tickets = tickets or {}
    items: list[EventItem] = []
    for part in (event.content.parts if event.content else None) or []:
        if part.function_call:
            fc = part.function_call
            items.append(EventItem(
                kind="call", name=fc.name or "", call_id=fc.id or "", data=dict(fc.args or {}),
                long_running=fc.id in long_running, ticket=tickets.get(fc.id or ""),
            ))
        elif part.function_response:
            fr = part.function_response
            items.append(EventItem(kind="response", name=fr.name or "", call_id=fr.id or "", data=fr.response))
        elif part.text:
            items.append(EventItem(kind="text", text=part.text, thought=bool(part.thought)))
        elif part.executable_code or part.code_execution_result:
            code = part.executable_code.code if part.executable_code else part.code_execution_result.output
            items.append(EventItem(kind="code", text=code or ""))
        else:
            items.append(EventItem(kind="other", data=part.model_dump(mode="json", exclude_none=True)))
    return EventView(
        event_id=event.id, author=event.author or "", items=items, pk=stored.pk, timestamp=_dt(stored.timestamp),
        error_code=event.error_code or "", error_message=event.error_message or "", raw_data=stored.data,
    )


def streaming_view(*, event_id: str, author: str, text: str) -> EventView:
    """A not-yet-stored event that is streaming in (the final event replaces it by DOM id)."""
    return EventView(event_id=event_id, author=author, items=[EventItem(kind="text", text=text)], streaming=True)


def tickets_by_call_id(session_pk: int, call_ids: Optional[Iterable[str]] = None) -> dict[str, Any]:
    from approvals.models import PendingCall

    qs = PendingCall.objects.filter(session_id=session_pk).select_related("closed_by")
    if call_ids is not None:
        qs = qs.filter(call_id__in=list(call_ids))
    return {t.call_id: t for t in qs}


# -- a conversation's timeline -------------------------------------------------------------------
@dataclass
class TurnError:
    turn_id: int
    error: str
    finished_at: Optional[datetime]

    @property
    def dom_id(self) -> str:
        return f"turn-{self.turn_id}-error"


def session_timeline(session: AdkSession) -> list[Any]:
    """Every stored event (as EventView) and every failed turn's error, oldest first (3 queries)."""
    tickets = tickets_by_call_id(session.pk)
    entries: list[tuple[float, int, Any]] = []
    for stored in StoredEvent.objects.filter(session=session).order_by("timestamp", "id"):
        entries.append((stored.timestamp, 0, event_view(stored, tickets)))
    for turn in Turn.objects.filter(session=session, status=Turn.Status.FAILED).only("id", "error", "finished_at"):
        when = turn.finished_at.timestamp() if turn.finished_at else float("inf")
        entries.append((when, 1, turn_error_view(turn)))
    entries.sort(key=lambda e: (e[0], e[1]))
    return [e[2] for e in entries]


def turn_error_view(turn: Turn) -> TurnError:
    return TurnError(turn_id=turn.pk, error=turn.error or "The turn failed.", finished_at=turn.finished_at)


def session_event_get(*, session_pk: int, event_pk: int) -> Optional[StoredEvent]:
    return StoredEvent.objects.filter(session_id=session_pk, pk=event_pk).first()
