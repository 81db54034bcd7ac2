"""The conversation timeline as people read it, on every page: stored ADK events as `EventView`s,
failed turns as `TurnError`s, in the order they happened.

No queries here: `agents_app.selectors` reads the rows and hands them over, so templates (and the
consumers that render the same partials) never parse event JSON themselves. Values in it read as a
person writes them (`agents_app.summaries`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone
from django.utils.html import format_html

from .models import StoredEvent, Turn
from .summaries import pretty_json, summarize

_DOM_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def event_dom_id(event_id: str) -> str:
    """A stable DOM id for an ADK event id (streaming chunks and the final event share it)."""
    return "event-" + _DOM_UNSAFE.sub("_", event_id or "unknown")


def _dt(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(ts, tz=UTC) if ts else None


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
        return summarize(self.data, tool_name=self.name if self.kind == "call" else "")

    @property
    def raw(self) -> str:
        return pretty_json(self.data)


# An event's actions a page shows (as "state updated", the artifacts list, a transfer, an escalation, a
# request to a person): an event without content that carries one of them is not bookkeeping.
_SHOWN_ACTIONS = (
    ("state_delta", "stateDelta"),
    ("artifact_delta", "artifactDelta"),
    ("transfer_to_agent", "transferToAgent"),
    ("escalate", "escalate"),
    ("requested_auth_configs", "requestedAuthConfigs"),
    ("requested_tool_confirmations", "requestedToolConfirmations"),
)


@dataclass
class EventView:
    event_id: str
    author: str
    items: list[EventItem] = field(default_factory=list)
    pk: int | None = None
    timestamp: datetime | None = None
    error_code: str = ""
    error_message: str = ""
    streaming: bool = False
    raw_data: Any = None
    invocation_id: str = ""
    node_path: str = ""  # ADK's nodeInfo.path, e.g. "reimbursement_agent@1"

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
    def bookkeeping(self) -> bool:
        """One of ADK's own markers with nothing for a person to read (an agent's end, `end_of_agent`; a
        resumable invocation's checkpoint, `agent_state`): no content, no error, no action a page shows.
        Pages leave it out (stored and served over the API as ADK's server serves it)."""
        if self.items or self.is_error or self.streaming:
            return False
        actions = (self.raw_data or {}).get("actions") or {}
        return not any(_get(actions, snake, camel) for snake, camel in _SHOWN_ACTIONS)

    @property
    def raw(self) -> str:
        return pretty_json(self.raw_data)

    @property
    def time_html(self) -> str:
        """<time> of its timestamp in the current time zone, as the `date:'c'`, `date:'Y-m-d H:i:s T'`
        and `time:'H:i:s'` filters write it (formatted here: those filters cost more than the card)."""
        if self.timestamp is None:
            return ""
        local = timezone.localtime(self.timestamp)
        title = f"{local:%Y-%m-%d %H:%M:%S} {local.tzname() or local.strftime('%z')}"
        return format_html('<time datetime="{}" title="{}">{}</time>', local.isoformat(), title, f"{local:%H:%M:%S}")


def long_running_ids(stored: StoredEvent) -> set[str]:
    """The ids of the calls this event pauses on (each has a ticket once it is stored)."""
    return set(stored.data.get("long_running_tool_ids") or ())


def _get(data: Mapping[str, Any], snake: str, camel: str) -> Any:
    """A field of stored event JSON (DjangoSessionService stores ADK's field names; camelCase is
    ADK's wire spelling, accepted too)."""
    value = data.get(snake)
    return data.get(camel) if value is None else value


def _part_item(part: Mapping[str, Any], long_running: set[str], tickets: Mapping[str, Any]) -> EventItem:
    """One part of an event's content, as the page shows it (the order of the checks is what a
    genai Part's fields give: a call, a response, text, code, code output, anything else)."""
    fc = _get(part, "function_call", "functionCall")
    if fc:
        call_id = fc.get("id") or ""
        return EventItem(
            kind="call",
            name=fc.get("name") or "",
            call_id=call_id,
            data=dict(fc.get("args") or {}),
            long_running=bool(call_id) and call_id in long_running,
            ticket=tickets.get(call_id),
        )
    fr = _get(part, "function_response", "functionResponse")
    if fr:
        name, call_id = fr.get("name") or "", fr.get("id") or ""
        return EventItem(kind="response", name=name, call_id=call_id, data=fr.get("response"))
    if part.get("text"):
        return EventItem(kind="text", text=part["text"], thought=bool(part.get("thought")))
    code = _get(part, "executable_code", "executableCode")
    if code:
        return EventItem(kind="code", text=code.get("code") or "")
    result = _get(part, "code_execution_result", "codeExecutionResult")
    if result:
        return EventItem(kind="code", text=result.get("output") or "")
    return EventItem(kind="other", data={k: v for k, v in part.items() if v is not None})


def event_view(stored: StoredEvent, tickets: Mapping[str, Any]) -> EventView:
    """A readable view of one stored event; `tickets` maps call id -> its ticket (a PendingCall).
    It reads the stored JSON's fields directly: validating every event into ADK's pydantic Event
    just to show it cost more than rendering it."""
    data = stored.data
    long_running = set(_get(data, "long_running_tool_ids", "longRunningToolIds") or ())
    content = data.get("content") or {}
    parts = content.get("parts") if isinstance(content, dict) else None
    return EventView(
        event_id=data.get("id") or "",
        author=data.get("author") or "",
        items=[_part_item(part, long_running, tickets) for part in parts or [] if isinstance(part, dict)],
        pk=stored.pk,
        timestamp=_dt(stored.timestamp),
        error_code=_get(data, "error_code", "errorCode") or "",
        error_message=_get(data, "error_message", "errorMessage") or "",
        raw_data=data,
    )


def streaming_view(*, event_id: str, author: str, text: str, event: dict | None = None) -> EventView:
    """A not-yet-stored event that is streaming in (the final event replaces it by DOM id)."""
    event = event or {}
    return EventView(
        event_id=event_id,
        author=author,
        items=[EventItem(kind="text", text=text)],
        streaming=True,
        invocation_id=event.get("invocationId", ""),
        node_path=(event.get("nodeInfo") or {}).get("path", ""),
    )


# -- a conversation's timeline -------------------------------------------------------------------
@dataclass
class TurnError:
    turn_id: int
    error: str
    finished_at: datetime | None
    retryable: bool = False  # it stored no event: running it again repeats nothing
    session_pk: int = 0

    @property
    def dom_id(self) -> str:
        return turn_error_dom_id(self.turn_id)


def turn_error_dom_id(turn_id: int) -> str:
    return f"turn-{turn_id}-error"


def timeline_entries(
    events: Iterable[StoredEvent], failed: Iterable[TurnError], tickets: Mapping[str, Any]
) -> list[Any]:
    """Stored events (as EventViews) in append order, with failed turns' errors slotted in by time."""
    entries: list[tuple[float, int, Any]] = []
    latest = float("-inf")
    # Append order (ADK stores some events out of timestamp order); errors slot in by time.
    for stored in events:
        latest = max(latest, stored.timestamp)
        view = event_view(stored, tickets)
        if not view.bookkeeping:
            entries.append((latest, 0, view))
    for error in failed:
        entries.append((error.finished_at.timestamp() if error.finished_at else float("inf"), 1, error))
    entries.sort(key=lambda e: (e[0], e[1]))
    return [e[2] for e in entries]


def turn_error_view(turn: Turn, *, stored_nothing: bool) -> TurnError:
    return TurnError(
        turn_id=turn.pk,
        error=turn.error or "The turn failed.",
        finished_at=turn.finished_at,
        retryable=stored_nothing,
        session_pk=turn.session_id,
    )
