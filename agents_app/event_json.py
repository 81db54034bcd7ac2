"""ADK events as the session store keeps them: `Event.model_dump(mode="json", exclude_none=True)`
(jsonb), read back with `Event.model_validate`, so every field ADK has survives the round trip.
U+0000 is the one lossy character (jsonb cannot hold it): stored as U+FFFD."""

from __future__ import annotations

import re
from typing import Any

from google.adk.events.event import Event


def event_to_json(event: Event) -> dict[str, Any]:
    return event.model_dump(mode="json", exclude_none=True)


def _without_nul(value: Any) -> Any:
    """PostgreSQL's jsonb cannot hold U+0000: store it as U+FFFD (the only lossy character)."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_without_nul(k): _without_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_without_nul(v) for v in value]
    return value


def event_from_json(data: dict[str, Any]) -> Event:
    return Event.model_validate(data)


# U+0000 escaped in JSON text: "\\u0000" after an even number of backslashes (after an odd number,
# the backslash is itself escaped and "u0000" is text).
_ESCAPED_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def event_json_text(event: Event) -> str:
    """The event as stored, as JSON text: event_to_json's content with U+0000 as U+FFFD (as
    _without_nul does), serialised once by pydantic-core rather than dumped to Python objects,
    walked, and dumped again by json."""
    text = event.model_dump_json(exclude_none=True)
    if "\\u0000" in text:
        text = _ESCAPED_NUL.sub(r"\1\\ufffd", text)
    return text


def event_interrupt_ids(event: Event) -> list[str]:
    ids = set(event.long_running_tool_ids or ())
    return sorted(fc.id for fc in event.get_function_calls() if fc.id in ids)


def event_response_ids(event: Event) -> list[str]:
    return sorted(fr.id for fr in event.get_function_responses() if fr.id)
