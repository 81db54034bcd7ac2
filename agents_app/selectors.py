"""Reads on the agent side: conversation lists and timelines of stored events (agent cards are in
agent_cards.py).

Event views are plain dataclasses built from the stored ADK event JSON, so templates (and the
consumers that render the same partials) never parse JSON themselves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from django.db.models import Case, CharField, Exists, OuterRef, QuerySet, Subquery, Value, When

from adkweb.roles import is_approver, is_observer

from . import formatting
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


def _dt(ts: float | None) -> datetime | None:
    return datetime.fromtimestamp(ts, tz=UTC) if ts else None


def summarize(value: Any, limit: int = 120, tool_name: str = "", key: str = "") -> str:
    """A one-line human summary of a JSON value ("purpose: meals · amount: $200.00"), a tool's
    arguments in its declared order."""
    if isinstance(value, dict):
        keys = formatting.ordered_keys(value, tool_name)
        text = " · ".join(f"{k}: {summarize(value[k], 40, key=k)}" for k in keys)
    elif isinstance(value, list):
        text = ", ".join(summarize(v, 40) for v in value)
    elif value is None:
        text = "—"
    else:
        text = formatting.readable(value, key)
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
        return summarize(self.data, tool_name=self.name if self.kind == "call" else "")

    @property
    def raw(self) -> str:
        return pretty_json(self.data)


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


def event_view(stored: StoredEvent, tickets: dict[str, Any] | None = None) -> EventView:
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
            items.append(
                EventItem(
                    kind="call",
                    name=fc.name or "",
                    call_id=fc.id or "",
                    data=dict(fc.args or {}),
                    long_running=fc.id in long_running,
                    ticket=tickets.get(fc.id or ""),
                )
            )
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
        event_id=event.id,
        author=event.author or "",
        items=items,
        pk=stored.pk,
        timestamp=_dt(stored.timestamp),
        error_code=event.error_code or "",
        error_message=event.error_message or "",
        raw_data=stored.data,
    )


def streaming_view(*, event_id: str, author: str, text: str) -> EventView:
    """A not-yet-stored event that is streaming in (the final event replaces it by DOM id)."""
    return EventView(event_id=event_id, author=author, items=[EventItem(kind="text", text=text)], streaming=True)


def tickets_by_call_id(session_pk: int, call_ids: Iterable[str] | None = None) -> dict[str, Any]:
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
    finished_at: datetime | None
    retryable: bool = False  # it stored no event: running it again repeats nothing
    session_pk: int = 0

    @property
    def dom_id(self) -> str:
        return f"turn-{self.turn_id}-error"


def session_timeline(session: AdkSession) -> list[Any]:
    """Every stored event (as EventView) and every failed turn's error, oldest first (3 queries)."""
    tickets = tickets_by_call_id(session.pk)
    entries: list[tuple[float, int, Any]] = []
    latest = float("-inf")
    # Append order (ADK stores some events out of timestamp order); errors slot in by time.
    for stored in StoredEvent.objects.filter(session=session).order_by("id"):
        latest = max(latest, stored.timestamp)
        entries.append((latest, 0, event_view(stored, tickets)))
    failed = Turn.objects.filter(session=session, status=Turn.Status.FAILED).only(
        "id", "session_id", "error", "finished_at"
    )
    for turn in failed.annotate(stored_nothing=~Exists(StoredEvent.objects.filter(turn=OuterRef("pk")))):
        when = turn.finished_at.timestamp() if turn.finished_at else float("inf")
        entries.append((when, 1, turn_error_view(turn)))
    entries.sort(key=lambda e: (e[0], e[1]))
    return [e[2] for e in entries]


def turn_error_view(turn: Turn) -> TurnError:
    stored_nothing = getattr(turn, "stored_nothing", None)
    if stored_nothing is None:
        stored_nothing = not turn.events.exists()
    return TurnError(
        turn_id=turn.pk,
        error=turn.error or "The turn failed.",
        finished_at=turn.finished_at,
        retryable=stored_nothing,
        session_pk=turn.session_id,
    )


def session_event_get(*, session_pk: int, event_pk: int) -> StoredEvent | None:
    return StoredEvent.objects.filter(session_id=session_pk, pk=event_pk).first()


# -- the HTTP API (agents_app.api) -----------------------------------------------------------------
def adk_session_get(*, app_name: str, user_id: str, session_id: str) -> AdkSession | None:
    """One session by its ADK identity."""
    return AdkSession.objects.filter(app_name=app_name, user_id=user_id, session_id=session_id).first()


def turn_events(*, turn_id: int, after_pk: int = 0) -> list[StoredEvent]:
    """Events a turn's run stored (agent-authored, as ADK's runner yields them), oldest first."""
    return list(StoredEvent.objects.filter(turn_id=turn_id, pk__gt=after_pk).exclude(author="user").order_by("id"))


def turn_state(*, turn_id: int) -> tuple[str, str]:
    """(status, error) of a turn; ("failed", ...) if it is gone (its session was deleted)."""
    row = Turn.objects.filter(pk=turn_id).values_list("status", "error").first()
    return row if row else (Turn.Status.FAILED, "The session was deleted while the turn was owed.")


# -- conversation lists ------------------------------------------------------------------------
def sessions_with_status(qs: QuerySet | None = None) -> QuerySet:
    """Sessions annotated with `status` (running / waiting / failed / idle) in one query."""
    from approvals.models import PendingCall

    qs = qs if qs is not None else AdkSession.objects.all()
    last_turn = Turn.objects.filter(session=OuterRef("pk")).order_by("-created_at", "-id").values("status")[:1]
    return qs.annotate(
        has_active_turn=Exists(Turn.objects.filter(session=OuterRef("pk"), status__in=ACTIVE_TURN_STATUSES)),
        has_open_ticket=Exists(
            PendingCall.objects.filter(session=OuterRef("pk"), status__in=PendingCall.OPEN_STATUSES)
        ),
        last_turn_status=Subquery(last_turn),
    ).annotate(
        status=Case(
            When(has_active_turn=True, then=Value("running")),
            When(has_open_ticket=True, then=Value("waiting")),
            When(last_turn_status=Turn.Status.FAILED, then=Value("failed")),
            default=Value("idle"),
            output_field=CharField(),
        )
    )


def sessions_visible_to(user: Any) -> QuerySet:
    """Observers and approvers see every conversation; anyone else their own."""
    qs = AdkSession.objects.all()
    if not (is_observer(user) or is_approver(user)):
        qs = qs.filter(user_id=user.get_username())
    return qs


def session_list(*, user: Any, app_name: str = "", status: str = "") -> QuerySet:
    """The conversations a user may see, newest activity first, optionally filtered."""
    qs = sessions_with_status(sessions_visible_to(user))
    if app_name:
        qs = qs.filter(app_name=app_name)
    if status in SESSION_STATUSES:
        qs = qs.filter(status=status)
    return qs.order_by("-update_time", "-id")


SESSIONS_PER_PAGE = 25


def session_page(*, user: Any, app_name: str = "", status: str = "", page: Any = 1) -> Any:
    """One page (django Page) of the conversation list."""
    from django.core.paginator import Paginator

    return Paginator(session_list(user=user, app_name=app_name, status=status), SESSIONS_PER_PAGE).get_page(page)


def session_list_agents(*, user: Any) -> list[str]:
    """Agent names to filter the list by: enabled agents plus any seen in visible sessions."""
    from .agents import app_names

    seen = sessions_visible_to(user).order_by().values_list("app_name", flat=True).distinct()
    return sorted(set(app_names()) | set(seen))


def session_row(*, user: Any, session_pk: int) -> AdkSession | None:
    """One annotated session for the list, or None if the user may not see it."""
    return sessions_with_status(sessions_visible_to(user)).filter(pk=session_pk).first()


def session_status(*, session_pk: int) -> str:
    row = sessions_with_status(AdkSession.objects.filter(pk=session_pk)).values_list("status", flat=True).first()
    return row or "idle"


def session_open_tickets(*, session_pk: int) -> list[Any]:
    from approvals.models import PendingCall

    return list(PendingCall.objects.filter(session_id=session_pk, status__in=PendingCall.OPEN_STATUSES).order_by("id"))
