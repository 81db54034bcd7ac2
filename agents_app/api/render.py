"""ADK's REST JSON for sessions and events: camelCase, no None fields, no internal metadata and
no credential secrets, exactly as `adk api_server` serialises them."""

from __future__ import annotations

from typing import Any

from google.adk.events._internal_metadata import public_event, public_session
from google.adk.events.event import Event
from google.adk.sessions.session import Session

from ..session_service import event_from_json

try:  # private in ADK 2.13; keep working (unredacted) if a later release moves it
    from google.adk.auth.auth_credential import _redact_credential_secrets as _redact
except ImportError:  # pragma: no cover

    def _redact(value: Any) -> Any:
        return value


def event_json(data: dict[str, Any]) -> dict[str, Any]:
    """A stored event (our snake_case JSON) as ADK's REST JSON."""
    return _redact(public_event(event_from_json(data)).model_dump(mode="json", by_alias=True, exclude_none=True))


def session_json(session: Session) -> dict[str, Any]:
    return _redact(public_session(session).model_dump(mode="json", by_alias=True, exclude_none=True))


def partial_event_json(event: Event) -> dict[str, Any]:
    """A streaming chunk as ADK's REST JSON, with everything ADK gave it (invocation id, node path)."""
    return _redact(public_event(event).model_dump(mode="json", by_alias=True, exclude_none=True))
