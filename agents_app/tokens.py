"""API tokens (`Authorization: Token <key>`): create, revoke, and the auth backend that checks them.

Keys are random, shown once, stored as SHA-256. `TokenBackend` is listed in
AUTHENTICATION_BACKENDS; the API plumbing (`adkweb.api`) asks Django's `authenticate(api_token=...)`.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import BaseBackend
from django.db import connection, transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from adkweb.compiled import Ride, rows, rows_both

from .models import ApiToken

KEY_PREFIX = "adkw_"
PREFIX_LENGTH = 12  # "adkw_" + 7 characters: enough to tell tokens apart in the admin


# The request attribute that holds a `compiled.Ride` for the token lookup's round trip (agents_app.api.run).
RIDE = "adkweb_token_ride"


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@transaction.atomic
def token_create(*, user: Any, name: str = "") -> tuple[ApiToken, str]:
    """Create a token for a user; returns the row and the key (the only time the key is known)."""
    key = KEY_PREFIX + secrets.token_hex(20)
    token = ApiToken.objects.create(user=user, name=name, prefix=key[:PREFIX_LENGTH], key_hash=key_hash(key))
    return token, key


def tokens_revoke(*, tokens: QuerySet[ApiToken]) -> int:
    """Revoke tokens (the active ones among them): requests that send them get 401 from now on."""
    return tokens.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())


def _user_fields() -> list[str]:
    return [f.attname for f in get_user_model()._meta.concrete_fields]


def _lookup(hash_: str) -> QuerySet:
    return (
        ApiToken.objects.filter(key_hash=hash_)
        .order_by()
        .values_list("pk", "last_used_at", "revoked_at", *(f"user__{name}" for name in _user_fields()))[:1]
    )


def token_user(key: str, ride: Ride | None = None) -> Any | None:
    """The active user owning an active token with this key, else None. One statement, compiled once
    per process (every API request asks it). `ride`: a read of the request's own sent in the same
    round trip (`compiled.rows_both`; e.g. `/run`'s session row), whatever the answer: its caller uses
    its rows only once the request is authenticated and allowed."""
    hash_ = key_hash(key.strip())
    if ride is None:
        found = rows("api_token_user", (), _lookup, hash_)
    else:
        found = rows_both("api_token_user", (), _lookup, (hash_,), ride)
    if not found:
        return None
    pk, last_used_at, revoked_at, *user_values = found[0]
    user = get_user_model().from_db(connection.alias, _user_fields(), user_values)
    if revoked_at is not None or not user.is_active:
        return None
    now = timezone.now()
    if last_used_at is None or (now - last_used_at).total_seconds() > 60:
        # Cheap bookkeeping: at most one write a minute per token.
        ApiToken.objects.filter(pk=pk).update(last_used_at=now)
    return user


class TokenBackend(BaseBackend):
    """`authenticate(request, api_token=key)`: the user of an active token (never a login session)."""

    def authenticate(self, request: HttpRequest | None, api_token: str | None = None, **kwargs: Any) -> Any | None:
        if api_token is None:
            return None
        return token_user(api_token, getattr(request, RIDE, None) if request is not None else None)


def user_for_username(username: str) -> Any:
    return get_user_model().objects.get(**{get_user_model().USERNAME_FIELD: username})
