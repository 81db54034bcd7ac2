"""Rights re-checked on open websockets: a socket carries a page's live fragments only while its person
may still see them.

A socket is authorised when it connects (which socket, which audience group: the consumers), and the
fragments it forwards are then rendered once per audience and sent without touching the database
(agents_app.fanout, approvals.fanout). A right lost while the socket stays open (out of a role or a
team, deactivated, logged out, the password changed elsewhere, the conversation deleted) must not keep
the stream flowing, so each socket asks again every ADKWEB_LIVE_RECHECK_SECONDS (±20%: sockets opened
together do not ask together), on a timer, never per message (adkweb.live_socket.LiveConsumer):

- nobody behind it any more (no login behind its session cookie, inactive) or no right left: the socket
  leaves its group and closes with its refusal code (the page's live dot goes out; the htmx ws
  extension does not reconnect on it);
- the right changed (another audience of a conversation, other teams for the inbox): closed with
  RIGHTS_CHANGED, on which the page reconnects, and the connect decides under the new rights;
- the same: the socket goes on with the person as read now (the sockets that read the database per
  message, the conversation list's and the ticket page's, then ask with today's roles).

Sockets of one login that show the same thing (a page's tabs, a bench's 1,000 sockets on one cookie)
share a check made within the last REUSE of the interval. A lost right stops reaching a page within
1.3 intervals: 78 s at the default 60. A login that ends by a logout, a password change or the account's
deactivation does not wait for this: its sockets close at once (adkweb.live_logins); the check still
catches a session that expired or was flushed otherwise.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model, load_backend
from django.utils.crypto import constant_time_compare

RIGHTS_CHANGED = 1012  # "service restart": the htmx ws extension reconnects on it
JITTER = 0.2
REUSE = 0.1  # of the interval

_recent: dict[tuple, tuple[float, Any, Any]] = {}  # (session key, what the socket shows) -> (when, person, rights)


def next_check() -> float | None:
    """Seconds until a socket's next check; None: off (ADKWEB_LIVE_RECHECK_SECONDS=0)."""
    seconds = float(settings.ADKWEB_LIVE_RECHECK_SECONDS)
    return seconds * random.uniform(1 - JITTER, 1 + JITTER) if seconds > 0 else None


def rights_now(scope: dict, key: tuple, rights: Callable[[Any], Any]) -> tuple[Any, Any]:
    """(the person behind the socket now, `rights(person)`), or (None, None) when nobody is; shared by
    the sockets of one login session and `key` (what `rights` depends on besides the person) for REUSE
    of the interval."""
    session_key = _session_key(scope)
    now, window = time.monotonic(), REUSE * float(settings.ADKWEB_LIVE_RECHECK_SECONDS)
    if session_key is not None:
        known = _recent.get((session_key, *key))
        if known is not None and now - known[0] < window:
            return known[1], known[2]
    person = person_now(scope)
    found = (person, None if person is None else rights(person))
    if session_key is not None:
        if len(_recent) > 1024:
            for stale in [k for k, (when, *_) in list(_recent.items()) if now - when >= window]:
                _recent.pop(stale, None)
        _recent[(session_key, *key)] = (now, *found)
    return found


def person_now(scope: dict) -> Any | None:
    """The person behind a socket as they are now: the login its session cookie holds, if that session
    still exists and still proves it (a logout, an expired or flushed session, a password changed
    elsewhere: None) and they are active; for a socket with no login session (tests that put a user in
    the scope), that user read again. Reads only: the session is never written."""
    user = scope.get("user")
    if user is None or not user.is_authenticated:
        return None
    session_key = _session_key(scope)
    if session_key is None:
        again = get_user_model()._default_manager.filter(pk=user.pk).first()
        return again if again is not None and again.is_active else None
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    person = _logged_in(store)
    return person if person is not None and person.pk == user.pk else None


def _session_key(scope: dict) -> str | None:
    session = scope.get("session")
    return None if session is None else session.session_key


def _logged_in(store: Any) -> Any | None:
    """django.contrib.auth.get_user's reading of a session, without its writes (it flushes a session
    whose hash no longer matches, and cycles the key of one matched by a fallback secret)."""
    try:
        user_id = get_user_model()._meta.pk.to_python(store[SESSION_KEY])
        backend_path = store[BACKEND_SESSION_KEY]
    except KeyError:
        return None
    if backend_path not in settings.AUTHENTICATION_BACKENDS:
        return None
    user = load_backend(backend_path).get_user(user_id)  # None for an inactive user (ModelBackend)
    if user is None or not hasattr(user, "get_session_auth_hash"):
        return user
    stored = store.get(HASH_SESSION_KEY) or ""
    hashes = [user.get_session_auth_hash()]
    hashes += [user._get_session_auth_hash(secret=s) for s in settings.SECRET_KEY_FALLBACKS]  # type: ignore[attr-defined]
    return user if stored and any(constant_time_compare(stored, h) for h in hashes) else None
