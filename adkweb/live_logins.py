"""A login that ends closes its websockets at once, on every web process.

A socket re-checks its person's rights on a timer (adkweb.live_rights), which a logout would wait out:
up to 1.3 intervals (78 s) of the person's other tabs still receiving what pages push (a ticket's
arguments, a conversation's text), on a computer someone else now sits at. So every socket, as it
joins its page's group (adkweb.live_socket.join), also joins the group of its person's logins
(`group`), knowing which login it was opened under (`login_tag`: a hash of its session key; the key
itself is in no group name, message or log), and these close them (LOGIN_ENDED; each socket closes
with its refusal code, on which the page does not reconnect):

- a logout (Django's `user_logged_out`): the sockets of that login, no other login of the person's;
- the person's password changed (by them on another login, by an administrator, by `changepassword`):
  every socket of theirs. Django ends every login of theirs but the changer's own, whose session key it
  replaces (update_session_auth_hash): the sockets opened under the old key are as ended (the re-check
  closed them too);
- the account deactivated or deleted: every socket of theirs.

One group per person, not per login: a password change or a deactivation must reach every login of
theirs, and nothing finds a person's sessions by person; a logout's message names its login and goes
only to the processes holding that person's sockets. Joining costs a socket one more group at connect
before its consumer decides anything; nothing is read or sent per pushed message. A session that
expires closes its sockets when it does (adkweb.live_socket reads its expiry when they connect); a
login that ends otherwise (another person logging in on the same browser) is the re-check's. The same
group carries a change of the person's roles (adkweb.live_roles), which asks their sockets' rights again.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_save

from adkweb import live

LOGIN_ENDED = "login.ended"  # {"type", "login": a login_tag, or absent: every login of the person}
RIGHTS_CHANGED = "rights.changed"  # {"type", "change": a token naming the change} (adkweb.live_roles)
_ROLES = ("is_staff", "is_superuser")  # and the username: a conversation is its owner's by name


def group(person_pk: Any) -> str:
    return f"logins-{person_pk}"


def login_tag(session_key: str) -> str:
    """What names a login (a session) in messages: a hash of its key, which a reader cannot turn back
    into a cookie that logs in."""
    return hashlib.sha256(session_key.encode()).hexdigest()[:32]


def of_socket(scope: dict) -> tuple[str | None, str | None]:
    """(the group of the person behind a socket, the tag of the login it was opened under); None for
    what it has not (no person: an anonymous socket; no session: tests that put a user in the scope)."""
    user, session = scope.get("user"), scope.get("session")
    if user is None or not user.is_authenticated:
        return None, None
    key = None if session is None else session.session_key
    return group(user.pk), None if key is None else login_tag(key)


def logged_out(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """Sent before Django flushes the session: its key is still the request's. The session is deleted
    here, before the message leaves, not after: a socket that joins the group too late to hear it finds
    the session gone when it reads its login (adkweb.live_socket); Django's flush then deletes nothing."""
    session = getattr(request, "session", None)
    key = getattr(session, "session_key", None)
    if user is not None and session is not None and key:
        session.delete()
        live.group_send(group(user.pk), {"type": LOGIN_ENDED, "login": login_tag(key)})


def _watched(sender: Any) -> tuple[str, ...]:
    return ("password", "is_active", *_ROLES, sender.USERNAME_FIELD)


def _user_saving(sender: Any, instance: Any, raw: bool = False, update_fields: Any = None, **kwargs: Any) -> None:
    """Note the stored password, activity and roles a save may change (one read, only for a save that
    may: not last_login's)."""
    fields = _watched(sender)
    if raw or instance._state.adding or (update_fields is not None and not set(fields) & set(update_fields)):
        return
    before = sender._default_manager.filter(pk=instance.pk).values_list(*fields).first()
    instance.__dict__["_logins_before"] = before


def _user_saved(sender: Any, instance: Any, **kwargs: Any) -> None:
    """A password changed or an account deactivated ends every login of the person: their sockets close
    once the change is committed (one rolled back ends nothing). Staff or superuser status or the
    username changed: their sockets' rights are asked again (`persons_changed`)."""
    before = instance.__dict__.pop("_logins_before", None)
    if before is None:
        return
    password, active, *roles = before
    if password != instance.password or (active and not instance.is_active):
        _all_ended(instance.pk)
        if active and not instance.is_active:
            _rights_changing([instance.pk])
    elif roles != [getattr(instance, f) for f in _watched(sender)[2:]]:
        persons_changed([instance.pk])


def _user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    _all_ended(instance.pk)


# Told at once, in the transaction that changes them (its locks held), of the people whose rights a change
# may have taken or moved (the same changes the sockets hear of, and a deactivation): an app's own
# consequences, e.g. approvals.assignees gives back the tickets an assignee may no longer decide.
_rights_hooks: list[Callable[[list[Any]], object]] = []


def on_rights_change(hook: Callable[[list[Any]], object]) -> None:
    """Have `hook(person pks)` called with each change of rights (once per hook, however often asked)."""
    if hook not in _rights_hooks:
        _rights_hooks.append(hook)


def _rights_changing(pks: list[Any]) -> None:
    for hook in _rights_hooks:
        hook(pks)


def rights_changed() -> dict[str, str]:
    """The message that has a socket ask its rights again (adkweb.live_roles), a fresh token naming
    this change."""
    return {"type": RIGHTS_CHANGED, "change": uuid.uuid4().hex}


def persons_changed(pks: Iterable[Any]) -> None:
    """Once the transaction commits (at once outside one), have these people's sockets ask their rights
    again (adkweb.live_roles); the rights hooks (`on_rights_change`) are told now."""
    people = sorted(set(pks))
    if people:
        _rights_changing(people)
    groups = [group(pk) for pk in people]
    if groups:
        message = rights_changed()
        transaction.on_commit(lambda: live.group_send_each(groups, message))


def _all_ended(pk: Any) -> None:
    to = group(pk)
    transaction.on_commit(lambda: live.group_send(to, {"type": LOGIN_ENDED}))


def connect() -> None:
    user_logged_out.connect(logged_out, dispatch_uid="adkweb_live_logins_logged_out")
    pre_save.connect(_user_saving, sender=settings.AUTH_USER_MODEL, dispatch_uid="adkweb_live_logins_saving")
    post_save.connect(_user_saved, sender=settings.AUTH_USER_MODEL, dispatch_uid="adkweb_live_logins_saved")
    post_delete.connect(_user_deleted, sender=settings.AUTH_USER_MODEL, dispatch_uid="adkweb_live_logins_deleted")
