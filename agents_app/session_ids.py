"""The ids a new session may be given: what its row can hold, and what one segment of its URL can carry.

ADK's store takes any string as a session id (a blank one is replaced by a uuid, the others stripped), so
its server creates sessions no URL reaches: "..", "." (clients and browsers normalise them out of a
path), "a/b" (a path segment cannot hold "/"), control characters (a URL parser drops tabs and
newlines; a page shows nothing). adkweb refuses them when a session is created, saying why; sessions
that already have such an id stay readable (nothing here is asked of a read)."""

from __future__ import annotations

from typing import cast

from adkweb.errors import Invalid

from .models import AdkSession

ID_MAX_LENGTH = cast(int, AdkSession._meta.get_field("session_id").max_length)


def _unusable(session_id: str) -> str | None:
    """Why no URL can address a session of this id (None: one can)."""
    if not session_id.strip():
        return "it is blank (whitespace only): send no sessionId (or null) and one is generated"
    if session_id != session_id.strip():
        return "it starts or ends with whitespace, which ADK strips: send it without"
    hidden = next((ch for ch in session_id if not ch.isprintable() and ch != " "), None)
    if hidden is not None:
        return f"it holds an invisible or control character (U+{ord(hidden):04X}), which URLs and pages drop"
    if session_id in (".", ".."):
        return "'.' and '..' are path segments that clients and browsers remove from a URL"
    slash = next((ch for ch in "/\\" if ch in session_id), None)
    if slash is not None:
        return f"it holds {slash!r}, and a session's id is one segment of its URL path (browsers read '\\' as '/')"
    return None


def ids_check(*, user_id: str, session_id: str | None) -> None:
    """400 unless a new session of these ids can be stored and addressed (no session id: one is generated)."""
    for label, value in (("user id", user_id), ("session id", session_id or "")):
        if len(value) > ID_MAX_LENGTH:  # PostgreSQL would refuse the row with a DataError
            raise Invalid(f"The {label} is longer than {ID_MAX_LENGTH} characters.")
    why = _unusable(session_id) if session_id else None
    if why is not None:
        raise Invalid(
            f"The session id {session_id!r} cannot be used: {why}. Nothing was created: choose an id of "
            "letters, digits and punctuation such as '-', '_' or '.' (ADK's clients send a uuid, or none)."
        )
