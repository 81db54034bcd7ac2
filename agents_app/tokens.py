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
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone

from .models import ApiToken

KEY_PREFIX = "adkw_"
PREFIX_LENGTH = 12  # "adkw_" + 7 characters: enough to tell tokens apart in the admin


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


def token_user(key: str) -> Any | None:
    """The active user owning an active token with this key, else None."""
    token = ApiToken.objects.select_related("user").filter(key_hash=key_hash(key.strip())).first()
    if token is None or not token.is_active or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        # Cheap bookkeeping: at most one write a minute per token.
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return token.user


class TokenBackend(BaseBackend):
    """`authenticate(request, api_token=key)`: the user of an active token (never a login session)."""

    def authenticate(self, request: HttpRequest | None, api_token: str | None = None, **kwargs: Any) -> Any | None:
        return token_user(api_token) if api_token is not None else None


def user_for_username(username: str) -> Any:
    return get_user_model().objects.get(**{get_user_model().USERNAME_FIELD: username})
