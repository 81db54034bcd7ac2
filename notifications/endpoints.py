"""Writes of webhook endpoints (the API's and the admin's): one endpoint per URL."""

from __future__ import annotations

import secrets
from typing import Any

from django.db import IntegrityError, transaction

from adkweb.errors import Conflict

from .models import WebhookEndpoint


def webhook_url_refusal(endpoint: WebhookEndpoint, *, url_changed: bool) -> str | None:
    """One endpoint per URL (each event reaches a URL once; its events are edited, not registered again):
    a new endpoint, or one moved to a URL, that another endpoint has (enabled or not), or one enabled at a
    URL another enabled endpoint has, is refused (409 on the API, the form's error in the admin). `endpoint`:
    as it would be saved."""
    others = WebhookEndpoint.objects.filter(url=endpoint.url)
    if endpoint.pk is not None:
        others = others.exclude(pk=endpoint.pk)
    if not url_changed:
        others = others.filter(enabled=True) if endpoint.enabled else others.none()
    existing = others.order_by("-enabled", "pk").first()
    if existing is None:
        return None
    named = f" ({existing.name})" if existing.name else ""
    state, enable = ("", "") if existing.enabled else (" (disabled)", " and enable it")
    return (
        f"Webhook endpoint #{existing.pk}{named}{state} already has this URL; one endpoint per URL: "
        f"change that one's events instead{enable}."
    )


def webhook_save(*, endpoint: WebhookEndpoint | None, actor: Any, **fields: Any) -> tuple[WebhookEndpoint, str]:
    """Create (endpoint=None) or change a webhook endpoint; returns it and the secret if one was generated.
    A URL another endpoint has is refused (409, `webhook_url_refusal`), also for two requests at once
    (the database's constraint: the second's INSERT waits for the first and fails)."""
    generated = ""
    before = None if endpoint is None else (endpoint.url, endpoint.enabled)
    if endpoint is None:
        endpoint = WebhookEndpoint(created_by=actor if actor and actor.is_authenticated else None)
        if not fields.get("secret"):
            fields["secret"] = generated = secrets.token_urlsafe(32)
    for name, value in fields.items():
        if value is not None:
            setattr(endpoint, name, value)
    if before != (endpoint.url, endpoint.enabled):
        changed = before is None or before[0] != endpoint.url
        refusal = webhook_url_refusal(endpoint, url_changed=changed)
        if refusal:
            raise Conflict(refusal)
        webhook_stored(endpoint.save, endpoint, url_changed=changed)
    else:
        endpoint.save()
    return endpoint, generated


def webhook_stored(save: Any, endpoint: WebhookEndpoint, *, url_changed: bool) -> None:
    """`save()` the endpoint in a savepoint: the database's one-endpoint-per-URL constraint refusing it (another
    endpoint took its URL since `webhook_url_refusal` was asked) is a 409 naming that endpoint."""
    try:
        with transaction.atomic():
            save()
    except IntegrityError as exc:
        refusal = webhook_url_refusal(endpoint, url_changed=url_changed)
        raise Conflict(refusal or "Another endpoint took this URL just now.") from exc
