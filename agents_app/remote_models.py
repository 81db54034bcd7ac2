"""Remote apps (configured by admins) and each local session's link to its session on the remote."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import models

from adkweb.http import unusable_port


def validate_base_url(value: str) -> None:
    """An http(s) URL with a host and, if any, a port from 1 to 65535. (Only the scheme was checked: the
    admin stored "http://[::1", with which the HTTP client cannot be made, and URLs that reach nothing.)
    Django's URLValidator would refuse names without a dot, such as a compose service's `http://adk:8000`."""
    if not value.startswith(("http://", "https://")):
        raise ValidationError("The base URL must start with http:// or https://.")
    if unusable_port(value) or not urlsplit(value).hostname or any(c.isspace() for c in value):
        raise ValidationError(
            "The base URL must be an http:// or https:// URL with a host and, if any, a port from 1 to 65535, "
            "e.g. http://agents.internal:8000."
        )


class RemoteApp(models.Model):
    """An ADK app served by another ADK server (`adk api_server` in Python, Go, Java or TypeScript).

    adkweb keeps the conversation, tickets and live pages; each turn is run by the remote server
    over its REST API (`/run_sse`). The auth header's value is a secret: written in the admin,
    sent to the remote server, never rendered or logged.
    """

    name = models.CharField(
        max_length=100,
        unique=True,
        help_text="The app's name in adkweb (a Python identifier): pages and /api/adk use it.",
    )
    description = models.TextField(blank=True)
    base_url = models.CharField(
        max_length=500,
        validators=[validate_base_url],
        help_text="Root of the remote ADK server's REST API, e.g. http://agents.internal:8000 (where /list-apps is).",
    )
    remote_app_name = models.CharField(
        max_length=128, help_text="The app's name on the remote server (one of its /list-apps)."
    )
    auth_header_name = models.CharField(
        max_length=100, blank=True, default="Authorization", help_text="e.g. Authorization or X-API-Key."
    )
    auth_header_value = models.CharField(max_length=4096, blank=True, help_text="Secret: never shown back.")
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        app_label = "agents_app"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:  # never the secret
        return f"<RemoteApp {self.name} {self.remote_app_name}@{self.base_url}>"

    @property
    def has_auth(self) -> bool:
        return bool(self.auth_header_name and self.auth_header_value)

    @property
    def auth_label(self) -> str:
        """How the auth header is shown: its name, never its value."""
        return f"{self.auth_header_name}: •••••• (set)" if self.has_auth else "none"

    @property
    def server_label(self) -> str:
        return f"{self.base_url.rstrip('/')} (app {self.remote_app_name})"


class RemoteSession(models.Model):
    """A local session of a remote app and its twin on the remote server: same user id, same session
    id, created there on the session's first turn.

    `unsettled_turn` is set (and committed) before a request is sent and cleared when its stream
    ended cleanly with every event stored: while set, the remote may hold events adkweb has not
    stored, so the next run first reads the remote session and stores what is missing.
    """

    session = models.OneToOneField(
        "agents_app.AdkSession", on_delete=models.CASCADE, primary_key=True, related_name="remote"
    )
    remote_session_id = models.CharField(max_length=128)
    created_remotely_at = models.DateTimeField(null=True, blank=True)
    unsettled_turn = models.ForeignKey(
        "agents_app.Turn", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    sends = models.PositiveIntegerField(default=0, help_text="Requests sent to the remote server.")

    class Meta:
        app_label = "agents_app"

    def __str__(self) -> str:
        return f"remote twin of session {self.session_id}"
