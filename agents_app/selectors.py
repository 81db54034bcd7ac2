"""Reads on the agent side: conversations (lists, status, timelines of stored events) and what the
API follows of a turn. Agent cards are in agent_cards.py; what a timeline looks like is
`agents_app.timeline` (these read the rows, it builds the views).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import Case, CharField, Exists, OuterRef, Q, QuerySet, Subquery, Value, When

from adkweb.roles import is_approver, is_observer

from . import timeline
from .models import AdkSession, Artifact, StoredEvent, Turn
from .timeline import EventView, TurnError

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

    qs = PendingCall.objects.filter(session_id=session_pk).select_related("closed_by")
    if call_ids is not None:
        qs = qs.filter(call_id__in=list(call_ids))
    return {t.call_id: t for t in qs}


def _failed_turns(session_pk: int) -> QuerySet[Turn]:
    return (
        Turn.objects.filter(session_id=session_pk, status=Turn.Status.FAILED)
        .only("id", "session_id", "error", "finished_at")
        .annotate(stored_nothing=~Exists(StoredEvent.objects.filter(turn=OuterRef("pk"))))
    )


def _error_view(turn: Turn) -> TurnError:
    return timeline.turn_error_view(turn, stored_nothing=turn.stored_nothing)  # type: ignore[attr-defined]  # annotated


def session_timeline(session: AdkSession) -> list[Any]:
    """Every stored event (as EventView) and every failed turn's error, oldest first (3 queries)."""
    events = StoredEvent.objects.filter(session=session).order_by("id")
    errors = [_error_view(t) for t in _failed_turns(session.pk)]
    return timeline.timeline_entries(events, errors, tickets_by_call_id(session.pk))


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

    return PendingCall.objects.select_related("closed_by").filter(pk=ticket_id, session_id=session_pk).first()


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


# -- artifacts ----------------------------------------------------------------------------------
PREVIEW_TYPES = {"image/png", "image/jpeg", "image/gif", "image/webp"}  # raster only: SVG can carry script


@dataclass
class ArtifactView:
    """An artifact of a conversation: its latest version, and how many there are."""

    filename: str
    latest: Artifact
    versions: int

    @property
    def previewable(self) -> bool:
        return self.latest.kind == "inline" and self.latest.mime_type in PREVIEW_TYPES


def _artifact_scope(session: AdkSession) -> Q:
    mine = Q(app_name=session.app_name, user_id=session.user_id)
    return mine & (Q(session_id=session.session_id) | Q(session_id=""))


def session_artifacts(*, session: AdkSession) -> list[ArtifactView]:
    """The conversation's artifacts (and its user's "user:" ones), by name, latest version first."""
    rows = Artifact.objects.filter(_artifact_scope(session)).order_by("filename", "-version")
    out: dict[str, ArtifactView] = {}
    for row in rows:
        if row.filename in out:
            out[row.filename].versions += 1
        else:
            out[row.filename] = ArtifactView(filename=row.filename, latest=row, versions=1)
    return list(out.values())


def session_artifact_get(*, session: AdkSession, filename: str, version: int | None) -> Artifact | None:
    rows = Artifact.objects.filter(_artifact_scope(session), filename=filename)
    if filename.startswith("user:"):
        rows = rows.filter(session_id="")
    else:
        rows = rows.filter(session_id=session.session_id)
    return rows.order_by("-version").first() if version is None else rows.filter(version=version).first()
