"""API clients: per-user API keys, and the idempotency keys their requests were made with."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .turns import Turn


class ApiToken(models.Model):
    """A per-user API key for `Authorization: Token <key>`. Only a SHA-256 of the key is stored:
    the key itself is shown once, when it is created."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, help_text="What this token is for (e.g. 'billing system').")
    prefix = models.CharField(max_length=16, db_index=True, editable=False, help_text="The key's first characters.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, help_text="Set to revoke the token.")

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class IdempotencyKey(models.Model):
    """A client's `Idempotency-Key` and the answer it got: a retry with that key gets the same answer."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    endpoint = models.CharField(max_length=300, help_text="Method and path the key was used on.")
    request_hash = models.CharField(max_length=64, help_text="SHA-256 of the endpoint and the request body.")
    status_code = models.PositiveSmallIntegerField(default=0)
    response = models.JSONField(null=True, blank=True)
    turn = models.ForeignKey(Turn, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="unique_idempotency_key_per_user")]

    def __str__(self) -> str:
        return f"{self.key} ({self.endpoint})"
