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
1.3 intervals: 78 s at the default 60. What is known to change rights does not wait for it: a login that
ends (a logout, a password change, the account deactivated or deleted) closes its sockets at once
(adkweb.live_logins), a change of roles has its person's sockets checked at once (adkweb.live_roles:
`since`, a check made after the change was heard), and a socket closes when its login's session
expires (`login_now`: the session's expiry, read when it connects); the timer catches the rest.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from importlib import import_module
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model, load_backend
from django.utils import timezone
from django.utils.crypto import constant_time_compare

RIGHTS_CHANGED = 1012  # "service restart": the htmx ws extension reconnects on it
JITTER = 0.2
REUSE = 0.1  # of the interval

_recent: dict[tuple, tuple[float, Any, Any]] = {}  # (session key, what the socket shows) -> (when, person, rights)
_logins: dict[str, tuple[float, Any, Any]] = {}  # session key -> (when, person, the session's expiry)
_heard: dict[str, float] = {}  # a change of roles (its message's token) -> when this process first heard of it


def next_check() -> float | None:
    """Seconds until a socket's next check; None: off (ADKWEB_LIVE_RECHECK_SECONDS=0)."""
    seconds = float(settings.ADKWEB_LIVE_RECHECK_SECONDS)
    return seconds * random.uniform(1 - JITTER, 1 + JITTER) if seconds > 0 else None


def rights_now(scope: dict, key: tuple, rights: Callable[[Any], Any], since: float | None = None) -> tuple[Any, Any]:
    """(the person behind the socket now, `rights(person)`), or (None, None) when nobody is; shared by
    the sockets of one login session and `key` (what `rights` depends on besides the person) for REUSE
    of the interval, and, given `since` (a change heard then: `heard`), only by a check begun since."""
    session_key = _session_key(scope)
    now, window = time.monotonic(), REUSE * float(settings.ADKWEB_LIVE_RECHECK_SECONDS)
    if session_key is not None:
        known = _recent.get((session_key, *key))
        if known is not None and now - known[0] < window and (since is None or known[0] >= since):
            return known[1], known[2]
    person = person_now(scope)
    found = (person, None if person is None else rights(person))
    if session_key is not None:
        _keep(_recent, (session_key, *key), (now, *found), window)
    return found


def login_now(scope: dict, since: float) -> tuple[Any, Any]:
    """(the person behind the socket's login now, or None; when its session expires, where the session
    engine keeps it in the database, else None), read after `since` (time.monotonic()): a read begun
    since is shared by the sockets of the login. A socket reads it when it has joined its person's
    logins group (a login that ended before is seen here, one that ends after is heard there), and when
    its session is due to expire."""
    session_key = _session_key(scope)
    if session_key is None:
        return person_now(scope), None
    known = _logins.get(session_key)
    if known is not None and known[0] >= since:
        return known[1], known[2]
    now = time.monotonic()
    found = _login_read(scope, session_key)
    _keep(_logins, session_key, (now, *found), REUSE * float(settings.ADKWEB_LIVE_RECHECK_SECONDS))
    return found


def heard(change: Any) -> float:
    """When this process first heard of this change of roles (adkweb.live_roles): the checks its
    sockets make for it may share one begun since."""
    now = time.monotonic()
    if not isinstance(change, str):
        return now
    if len(_heard) > 1024:
        _heard.clear()  # a change heard again after this is checked once more: no harm
    return _heard.setdefault(change, now)


def _keep(cache: dict, key: Any, value: tuple, window: float) -> None:
    if len(cache) > 1024:
        now = time.monotonic()
        for stale in [k for k, (when, *_) in list(cache.items()) if now - when >= window]:
            cache.pop(stale, None)
    cache[key] = value


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
    return _login_read(scope, session_key)[0]


def _login_read(scope: dict, session_key: str) -> tuple[Any, Any]:
    """(the person the session still proves, or None; the session's expiry, None if its engine keeps no
    row: the timer's check catches its end). A database-backed session is read as its store reads it
    (an expired row is no session), with the expiry, in one query."""
    user = scope["user"]
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    model = getattr(store, "get_model_class", None)
    if model is None:
        data, expires = store, None
    else:
        row = (
            model()
            .objects.filter(session_key=session_key, expire_date__gt=timezone.now())
            .values_list("session_data", "expire_date")
            .first()
        )
        if row is None:
            return None, None
        data, expires = store.decode(row[0]), row[1]
    person = _logged_in(data)
    return (person, expires) if person is not None and person.pk == user.pk else (None, None)


def _session_key(scope: dict) -> str | None:
    session = scope.get("session")
    return None if session is None else session.session_key


def _logged_in(store: Any) -> Any | None:
    """django.contrib.auth.get_user's reading of a session (a store, or its decoded data), without its
    writes (it flushes a session whose hash no longer matches, and cycles the key of one matched by a
    fallback secret)."""
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
