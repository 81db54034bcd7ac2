"""ADK's REST JSON for sessions and events: camelCase, no None fields, no internal metadata and
no credential secrets, exactly as `adk api_server` serialises them."""

from __future__ import annotations

import json
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


# What ADK's `_redact_credential_secrets` acts on: a dict with an auth type, requested auth configs or an
# auth credential (each key snake_case or camelCase), or the credential request's function call (by name).
# A dict with none of them is copied as it is, and so is the whole event.
REDACTION_MARKS = (
    "auth_type",
    "authType",
    "requested_auth_configs",
    "requestedAuthConfigs",
    "raw_auth_credential",
    "rawAuthCredential",
    "exchanged_auth_credential",
    "exchangedAuthCredential",
    "adk_request_credential",  # google.adk.auth.auth_tool's REQUEST_EUC_FUNCTION_CALL_NAME
)


def event_json(data: dict[str, Any]) -> dict[str, Any]:
    """A stored event (our snake_case JSON) as ADK's REST JSON."""
    return _redact(public_event(event_from_json(data)).model_dump(mode="json", by_alias=True, exclude_none=True))


def stored_event_json(text: str) -> dict[str, Any]:
    """event_json of a stored event's JSON text (a published message's `data_json`), with ADK's redaction
    walk (a copy of every dict and list: ~30 us of an event's ~130) only where it can change something
    (`redaction_needed`). The text is the JSON the store wrote (pydantic's, compact): its keys and
    names as written, never escaped."""
    rest = public_event(event_from_json(json.loads(text))).model_dump(mode="json", by_alias=True, exclude_none=True)
    return _redact(rest) if redaction_needed(text) else rest


def redaction_needed(text: str) -> bool:
    """Whether the JSON text holds one of REDACTION_MARKS other than as an empty dict's key (every event
    stores its actions' `"requested_auth_configs":{}`; an empty dict's redaction is itself)."""
    for mark in REDACTION_MARKS:
        found = text.count(mark)
        if found and found != text.count(f'"{mark}":{{}}'):
            return True
    return False


def session_json(session: Session) -> dict[str, Any]:
    return _redact(public_session(session).model_dump(mode="json", by_alias=True, exclude_none=True))


def partial_event_json(event: Event) -> dict[str, Any]:
    """A streaming chunk as ADK's REST JSON, with everything ADK gave it (invocation id, node path)."""
    return _redact(public_event(event).model_dump(mode="json", by_alias=True, exclude_none=True))
