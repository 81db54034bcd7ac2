"""A person's message to an agent as google.genai Content: parsed from the API's JSON (or refused with
InvalidMessage, HTTP 400), built from a chat's text, and stored as JSON (a turn's content)."""

from __future__ import annotations

from typing import Any

from google.genai import types
from pydantic import ValidationError as PydanticValidationError

from adkweb.errors import Invalid


class InvalidMessage(Invalid):
    """A message the agent cannot take (HTTP 400)."""


def content_parse(raw: Any) -> types.Content:
    """Validate a google.genai Content (camelCase or snake_case JSON) or raise InvalidMessage."""
    if not isinstance(raw, dict):
        raise InvalidMessage('newMessage must be a Content object, e.g. {"role": "user", "parts": [{"text": "hi"}]}.')
    try:
        content = types.Content.model_validate(raw)
    except PydanticValidationError as exc:
        raise InvalidMessage(
            f"newMessage is not a valid Content: {exc.errors()[0]['msg']} at {exc.errors()[0]['loc']}."
        ) from exc
    parts = content.parts or []
    if not parts:
        raise InvalidMessage("newMessage has no parts.")
    has_text = any(p.text for p in parts)
    has_fr = any(p.function_response for p in parts)
    if has_text and has_fr:
        raise InvalidMessage("Message cannot contain both function responses and text.")
    if not has_text and not has_fr:
        raise InvalidMessage("newMessage must carry text or function responses.")
    if any(p.function_call for p in parts):
        raise InvalidMessage("A user message cannot carry function calls.")
    content.role = "user"
    return content


def content_json(content: types.Content) -> dict[str, Any]:
    return content.model_dump(mode="json", exclude_none=True)


def text_content(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])
