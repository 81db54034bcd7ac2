"""The webhooks API's route table (mounted under /api/) and its response models: the URL patterns
and the OpenAPI document are generated from it."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from adkweb.routes import Op, Route

from . import api


class _Out(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Webhook(_Out):
    """A webhook endpoint (its secret is never shown, except once when the server generated it)."""

    id: int
    url: str
    name: str
    events: list[str]
    format: str
    enabled: bool
    created_by: str | None
    created_at: str
    updated_at: str
    deliveries: str
    secret: str | None = None


class WebhookList(_Out):
    results: list[Webhook]


class Deleted(_Out):
    deleted: int


class Attempt(_Out):
    number: int
    at: str
    ok: bool
    status_code: int | None
    error: str
    duration_ms: int


class WebhookDelivery(_Out):
    """One event sent (or being sent) to the endpoint, with every attempt."""

    id: str
    event: str
    ticket: int | None
    status: str
    attempts: int
    last_status_code: int | None
    last_error: str
    next_attempt_at: str | None
    delivered_at: str | None
    created_at: str
    attempt_log: list[Attempt]


class WebhookDeliveryList(_Out):
    results: list[WebhookDelivery]


ROUTES = [
    Route(
        "webhooks",
        api.webhooks,
        "webhooks",
        (
            Op("GET", "Webhook endpoints (admins)", response=WebhookList, errors=(401, 403)),
            Op(
                "POST",
                "Register an endpoint; the secret is generated (and returned once) if you send none",
                request=api.WebhookBody,
                response=Webhook,
                errors=(400, 401, 403, 409, 413),
                status=201,
            ),
        ),
    ),
    Route(
        "webhooks/<int:endpoint_id>",
        api.webhook,
        "webhook",
        (
            Op("GET", "One endpoint", response=Webhook, errors=(401, 403, 404)),
            Op(
                "PATCH",
                "Change an endpoint (any field)",
                request=api.WebhookPatch,
                response=Webhook,
                errors=(400, 401, 403, 404, 409),
            ),
            Op("DELETE", "Remove an endpoint (its deliveries are kept)", response=Deleted, errors=(401, 403, 404)),
        ),
    ),
    Route(
        "webhooks/<int:endpoint_id>/deliveries",
        api.webhook_deliveries,
        "webhook-deliveries",
        (
            Op(
                "GET",
                "The endpoint's newest deliveries, each with its attempts",
                response=WebhookDeliveryList,
                query={"page_size": "1 to 200 (default 50)"},
                errors=(400, 401, 403, 404),
            ),
        ),
    ),
]
