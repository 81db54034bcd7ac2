"""API tokens: `Authorization: Token <key>`. Keys are random, shown once, stored as SHA-256."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone

from .models import ApiToken

KEY_PREFIX = "adkw_"
PREFIX_LENGTH = 12  # "adkw_" + 7 characters: enough to tell tokens apart in the admin


class InvalidToken(Exception):
    """The Authorization header names a token that does not exist or was revoked (HTTP 401)."""


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def key_new() -> tuple[str, str, str]:
    """A fresh random key: (key, prefix, hash)."""
    key = KEY_PREFIX + secrets.token_hex(20)
    return key, key[:PREFIX_LENGTH], key_hash(key)


@transaction.atomic
def token_create(*, user: Any, name: str = "") -> tuple[ApiToken, str]:
    """Create a token for a user; returns the row and the key (the only time the key is known)."""
    key, prefix, digest = key_new()
    token = ApiToken.objects.create(user=user, name=name, prefix=prefix, key_hash=digest)
    return token, key


def token_revoke(*, token: ApiToken) -> ApiToken:
    """Revoke a token: requests that send it get 401 from now on."""
    if token.revoked_at is None:
        token.revoked_at = timezone.now()
        token.save(update_fields=["revoked_at"])
    return token


def token_authenticate(key: str) -> Any:
    """The active user owning `key`, or InvalidToken."""
    token = ApiToken.objects.select_related("user").filter(key_hash=key_hash(key.strip())).first()
    if token is None or not token.is_active or not token.user.is_active:
        raise InvalidToken("Invalid or revoked API token.")
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        # Cheap bookkeeping: at most one write a minute per token.
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


def token_from_header(request: HttpRequest) -> str | None:
    """The key from `Authorization: Token <key>` (or `Bearer <key>`), None when there is no such header."""
    header = request.headers.get("Authorization", "")
    scheme, _, key = header.partition(" ")
    if scheme.lower() not in {"token", "bearer"}:
        return None
    if not key.strip():
        raise InvalidToken("The Authorization header has no token: send 'Authorization: Token <key>'.")
    return key


def user_for_username(username: str) -> Any:
    return get_user_model().objects.get(**{get_user_model().USERNAME_FIELD: username})
