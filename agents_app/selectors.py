"""Reads on the agent side: conversations (lists, status, timelines of stored events) and what the
API follows of a turn. Agent cards are in agent_cards.py, artifacts in artifact_selectors.py (imported
back here); what a timeline looks like is `agents_app.timeline` (these read the rows, it builds the views).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import Exists, OuterRef, QuerySet

from adkweb.compiled_objects import objects
from adkweb.paging import KeysetPage, keyset_page

from . import timeline
from .artifact_selectors import PREVIEW_TYPES, ArtifactView, session_artifact_get, session_artifacts
from .models import AdkSession, StoredEvent, Turn
from .timeline import EventView, TurnError
from .visibility import sessions_visible_to

# agents_app.artifact_selectors', read from here (agents_app.views and agents_app.fanout).
__all__ = ["PREVIEW_TYPES", "ArtifactView", "session_artifact_get", "session_artifacts"]

ACTIVE_TURN_STATUSES = (Turn.Status.QUEUED, Turn.Status.RUNNING)
SESSION_STATUSES = {
    "running": "running",
    "waiting": "waiting for a human",
    "failed": "failed",
    "idle": "idle",
}


# -- a conversation's timeline -------------------------------------------------------------------
def tickets_by_call_id(session_pk: int, call_ids: Iterable[str] | None = None) -> dict[str, Any]:
    """A session's tickets (approvals.PendingCall) by function call id."""
    from approvals.models import PendingCall

    ids = None if call_ids is None else list(call_ids)

    def build(pk: int, *wanted: str) -> QuerySet:
        qs = PendingCall.objects.filter(session_id=pk).select_related("closed_by", "edited_by")
        return qs if ids is None else qs.filter(call_id__in=list(wanted))

    # Compiled once per connection and number of ids asked (objects keys on how many arguments it gets).
    found = objects("tickets_by_call_id", (ids is None,), build, session_pk, *(ids or ()))
    return {t.call_id: t for t in found}


def _failed_turns(session_pk: int) -> QuerySet[Turn]:
    return (
        Turn.objects.filter(session_id=session_pk, status=Turn.Status.FAILED)
        .only("id", "session_id", "error", "finished_at")
        .annotate(stored_nothing=~Exists(StoredEvent.objects.filter(turn=OuterRef("pk"))))
    )


def _error_view(turn: Turn) -> TurnError:
    return timeline.turn_error_view(turn, stored_nothing=turn.stored_nothing)  # type: ignore[attr-defined]  # annotated


TIMELINE_LATEST = 50  # events a conversation shows at first; "Load earlier events" brings more


@dataclass
class Timeline:
    """A window of a conversation, oldest first: its latest events (EventViews) with the failed turns'
    errors of that stretch of time; `earlier_pk` is the oldest shown event's pk when there are
    earlier events to load (else 0)."""

    entries: list[Any]
    earlier_pk: int = 0
    session_pk: int = 0

    def __iter__(self) -> Iterator[Any]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, index: Any) -> Any:
        return self.entries[index]

    @property
    def last_pk(self) -> int:
        return max((e.pk for e in self.entries if getattr(e, "pk", None)), default=0)


def session_timeline(
    session: AdkSession,
    *,
    before_pk: int = 0,
    limit: int | None = None,
    invocation_ids: Iterable[str] | None = None,
) -> Timeline:
    """The latest `limit` stored events of a conversation (before `before_pk` if given; of these ADK
    invocations only if given), as EventViews, with the errors of the turns that failed in that
    stretch, oldest first. At most 4 queries, whatever the conversation's length."""
    events = StoredEvent.objects.filter(session=session)
    if invocation_ids is not None:
        events = events.filter(invocation_id__in=[i for i in invocation_ids if i])
    if before_pk:
        events = events.filter(pk__lt=before_pk)
    limit = limit or TIMELINE_LATEST
    rows = list(events.order_by("-id")[: limit + 1])
    more = len(rows) > limit
    rows = rows[:limit][::-1]
    failed = _failed_turns(session.pk)
    if rows and (more or invocation_ids is not None):  # errors older than the window belong to earlier pages
        failed = failed.filter(finished_at__gte=_when(rows[0].timestamp))
    elif not rows and (before_pk or invocation_ids is not None):
        failed = failed.none()
    if before_pk:
        later = StoredEvent.objects.filter(pk=before_pk, session=session).values_list("timestamp", flat=True).first()
        if later is not None:
            failed = failed.filter(finished_at__lt=_when(later))
    errors = [_error_view(t) for t in failed]
    call_ids = set().union(*(timeline.long_running_ids(e) for e in rows)) if rows else set()
    tickets = tickets_by_call_id(session.pk, call_ids=call_ids) if call_ids else {}
    earlier = rows[0].pk if more and rows and invocation_ids is None else 0  # tickets link to the rest instead
    return Timeline(timeline.timeline_entries(rows, errors, tickets), earlier, session.pk)


def _when(timestamp: float) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)


def stored_event_view(stored: StoredEvent, tickets: Mapping[str, Any] | None = None) -> EventView:
    """One stored event as a view; its tickets are read unless given."""
    if tickets is None:
        ids = timeline.long_running_ids(stored)
        tickets = tickets_by_call_id(stored.session_id, call_ids=ids) if ids else {}
    return timeline.event_view(stored, tickets)


def session_event_view(*, session_pk: int, event_pk: int) -> EventView | None:
    stored = StoredEvent.objects.filter(session_id=session_pk, pk=event_pk).first()
    return None if stored is None else stored_event_view(stored)


def session_event_views_after(*, session_pk: int, after_pk: int, limit: int = 200) -> list[EventView]:
    """Events stored after `after_pk` (a page's last), oldest first."""
    events = list(StoredEvent.objects.filter(session_id=session_pk, pk__gt=after_pk).order_by("id")[:limit])
    tickets = tickets_by_call_id(session_pk) if events else {}
    return [timeline.event_view(e, tickets) for e in events]


def last_event_pk(*, session_pk: int) -> int:
    return StoredEvent.objects.filter(session_id=session_pk).order_by("-id").values_list("pk", flat=True).first() or 0


def failed_turn_view(*, turn_id: int, session_pk: int) -> TurnError | None:
    turn = _failed_turns(session_pk).filter(pk=turn_id).first()
    return None if turn is None else _error_view(turn)


def session_get(*, session_pk: int) -> AdkSession | None:
    return AdkSession.objects.filter(pk=session_pk).first()


def session_ticket_pks(*, session_pk: int) -> set[int]:
    from approvals.models import PendingCall

    return set(PendingCall.objects.filter(session_id=session_pk).values_list("pk", flat=True))


def session_ticket_get(*, session_pk: int, ticket_id: int) -> Any | None:
    """One ticket of this session (for its card in the conversation), else None."""
    from approvals.models import PendingCall

    return (
        PendingCall.objects.select_related("closed_by", "edited_by").filter(pk=ticket_id, session_id=session_pk).first()
    )


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
    """Sessions with their `status` (running / waiting / failed / idle): a stored column, kept by
    agents_app.session_status, so lists filter and sort on an index."""
    return qs if qs is not None else AdkSession.objects.all()


def session_list(*, user: Any, app_name: str = "", status: str = "") -> QuerySet:
    """The conversations a user may see, newest activity first, optionally filtered (the order and
    the filters match the indexes session_recent / session_status_recent)."""
    qs = sessions_visible_to(user).defer("state")
    if app_name:
        qs = qs.filter(app_name=app_name)
    if status in SESSION_STATUSES:
        qs = qs.filter(status=status)
    return qs.order_by("-update_time", "-id")


SESSIONS_PER_PAGE = 25


def session_page(
    *, user: Any, app_name: str = "", status: str = "", page: Any = 1, after: str = "", before: str = ""
) -> KeysetPage:
    """One page of the conversation list (capped count; by keyset when the pager's link carries one)."""
    try:
        number = max(1, int(page or 1))
    except (TypeError, ValueError):
        number = 1
    return keyset_page(
        session_list(user=user, app_name=app_name, status=status),
        sort_field="update_time",
        descending=True,
        per_page=SESSIONS_PER_PAGE,
        page=number,
        after=after,
        before=before,
        kind=float,
        count_ordered=True,  # status + recency: the session_status_recent index answers the count
    )


def session_list_agents(*, user: Any, chosen: str = "") -> list[str]:
    """Agent names to filter the list by, from the configuration (no scan of the sessions): every
    app, configured agents that are disabled now, and the one the filter names (a removed agent)."""
    from .agents import menus

    return sorted(set(menus().all_apps) | ({chosen[:128]} if chosen else set()))


def session_row(*, user: Any, session_pk: int) -> AdkSession | None:
    """One session for the list, or None if the user may not see it."""
    return sessions_visible_to(user).defer("state").filter(pk=session_pk).first()


def session_status(*, session_pk: int) -> str:
    row = AdkSession.objects.filter(pk=session_pk).values_list("status", flat=True).first()
    return row or "idle"


# -- the agent configurations a conversation ran with (agents_app.config_history) -------------------
def session_config_versions(*, session: AdkSession) -> list[dict[str, Any]]:
    """The configuration versions this conversation's turns ran with, oldest first: each with the
    turns that ran with it and its settings as JSON (2 queries)."""
    import json

    turns = Turn.objects.filter(session=session, config_version__isnull=False).select_related("config_version")
    used: dict[int, dict[str, Any]] = {}
    for turn in turns.order_by("id"):
        version = turn.config_version
        assert version is not None
        entry = used.setdefault(
            version.pk,
            {
                "version": version,
                "turns": [],
                "settings_json": json.dumps(version.config.get("generation_settings") or {}, ensure_ascii=False),
            },
        )
        entry["turns"].append(turn.pk)
    return list(used.values())
