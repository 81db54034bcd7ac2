"""Engine scenarios, written once and run twice: in embedded mode (tests/agents_app/test_engine_*.py, the
in-process worker on SQLite) and with services (tests/integration/test_engine_*.py, a real
`celery worker` subprocess on PostgreSQL + Redis). Each scenario drives the public services and
asserts what a caller would observe: stored events, ticket status, refusals.

Helpers here read what a conversation page would show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agents_app.models import AdkSession, StoredEvent, Turn
from approvals.models import PendingCall

Wait = Callable[..., Any]


def texts(session: AdkSession, author: str | None = None) -> list[str]:
    """Every stored text part, oldest first (optionally only one author's)."""
    out = []
    for event in StoredEvent.objects.filter(session=session).order_by("timestamp", "id"):
        if author is not None and event.author != author:
            continue
        out += [p["text"] for p in (event.data.get("content") or {}).get("parts", []) if p.get("text")]
    return out


def dialogue(session: AdkSession) -> list[tuple[str, str]]:
    """(author, text) for every stored text part, oldest first: the conversation as a page shows it."""
    return [(e.author, t) for e in _events(session) for t in _parts(e, "text")]


def agent_texts(session: AdkSession) -> list[str]:
    return [t for e in _events(session) if e.author != "user" for t in _parts(e, "text")]


def calls(session: AdkSession, name: str | None = None) -> list[dict[str, Any]]:
    """Stored function calls (model-authored), oldest first."""
    return [
        fc
        for e in _events(session)
        for fc in _parts(e, "functionCall", "function_call")
        if name is None or fc.get("name") == name
    ]


def responses(session: AdkSession, name: str | None = None) -> list[tuple[str, dict[str, Any]]]:
    """Stored function responses as (author, response), oldest first."""
    return [
        (e.author, fr)
        for e in _events(session)
        for fr in _parts(e, "functionResponse", "function_response")
        if name is None or fr.get("name") == name
    ]


def _events(session: AdkSession) -> list[StoredEvent]:
    return list(StoredEvent.objects.filter(session=session).order_by("timestamp", "id"))


def _parts(event: StoredEvent, *keys: str) -> list[Any]:
    out = []
    for part in (event.data.get("content") or {}).get("parts", []):
        for key in keys:
            if part.get(key):
                out.append(part[key])
    return out


def idle(session: AdkSession) -> bool:
    """Every turn of the session has finished (done or failed)."""
    return not Turn.objects.filter(session=session, status__in=[Turn.Status.QUEUED, Turn.Status.RUNNING]).exists()


def settle(session: AdkSession, wait: Wait, what: str = "the session's turns to finish") -> None:
    wait(lambda: idle(session), timeout=30, what=what)


def failed_turns(session: AdkSession) -> list[tuple[int, str]]:
    return list(Turn.objects.filter(session=session, status=Turn.Status.FAILED).values_list("pk", "error"))


def ticket_opened(session: AdkSession, wait: Wait) -> PendingCall:
    """The session's one open ticket, once the turn that opened it has finished."""
    settle(session, wait, "the turn that opens a ticket")
    assert failed_turns(session) == []
    return PendingCall.objects.get(session=session)
