"""The webhooks API (`/api/webhooks...`): admins register endpoints and read their deliveries.

Permissions are Django's model permissions on webhook endpoints (superusers have them; grant them
to a group in the admin): view to list and read, add to create, change to update, delete to delete.
The secret is write-only: it is returned once, when the server generated it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from django.core.exceptions import ValidationError
from django.core.validators import URLValidator
from django.http import HttpRequest, JsonResponse
from django.urls import reverse
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr

from adkweb.api import api_view, int_param, iso, json_body, parse
from adkweb.errors import Forbidden, Invalid, NotFound

from . import endpoints, webhook_urls
from .events import WEBHOOK_EVENTS
from .models import Delivery, WebhookEndpoint

Url = Annotated[StrictStr, Field(max_length=2000)]
Secret = Annotated[StrictStr, Field(min_length=16, max_length=200)]
Name = Annotated[StrictStr, Field(max_length=100)]


class WebhookBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: Url
    secret: Secret | None = None
    events: list[StrictStr] = Field(min_length=1, max_length=len(WEBHOOK_EVENTS))
    format: Literal["json", "slack"] = "json"
    name: Name = ""
    enabled: StrictBool = True


class WebhookPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: Url | None = None
    secret: Secret | None = None
    events: list[StrictStr] | None = Field(default=None, min_length=1, max_length=len(WEBHOOK_EVENTS))
    format: Literal["json", "slack"] | None = None
    name: Name | None = None
    enabled: StrictBool | None = None


def _check(request: HttpRequest, perm: str) -> None:
    if not request.user.has_perm(f"notifications.{perm}_webhookendpoint"):
        raise Forbidden("Only admins manage webhooks (the notifications webhook-endpoint permissions).")


def _validate(fields: dict[str, Any]) -> dict[str, Any]:
    if fields.get("url") is not None:
        try:
            URLValidator(schemes=["http", "https"])(fields["url"])
        except ValidationError as exc:
            raise Invalid("url: enter a valid http:// or https:// URL.") from exc
        refusal = webhook_urls.registration_refusal(fields["url"])
        if refusal:
            raise Invalid(refusal)
    unknown = sorted(set(fields.get("events") or []) - set(WEBHOOK_EVENTS))
    if unknown:
        raise Invalid(f"events: unknown {', '.join(unknown)}; use any of {', '.join(WEBHOOK_EVENTS)}.")
    return fields


def endpoint_json(endpoint: WebhookEndpoint) -> dict[str, Any]:
    return {
        "id": endpoint.pk,
        "url": endpoint.url,
        "name": endpoint.name,
        "events": endpoint.events,
        "format": endpoint.format,
        "enabled": endpoint.enabled,
        "created_by": endpoint.created_by.get_username() if endpoint.created_by else None,
        "created_at": endpoint.created_at.isoformat(),
        "updated_at": endpoint.updated_at.isoformat(),
        "deliveries": reverse("notifications_api:webhook-deliveries", args=[endpoint.pk]),
    }


def delivery_json(d: Delivery) -> dict[str, Any]:
    return {
        "id": str(d.uuid),
        "event": d.event.name,
        "ticket": d.ticket_id,
        "status": d.status,
        "attempts": d.attempts,
        "last_status_code": d.last_status_code,
        "last_error": d.last_error,
        "next_attempt_at": iso(d.next_attempt_at),
        "delivered_at": iso(d.delivered_at),
        "created_at": d.created_at.isoformat(),
        "attempt_log": [
            {"number": a.number, "at": a.started_at.isoformat(), "ok": a.ok, "status_code": a.status_code}
            | {"error": a.error, "duration_ms": a.duration_ms}
            for a in d.attempt_log.all()
        ],
    }


def _endpoint(endpoint_id: int) -> WebhookEndpoint:
    endpoint = WebhookEndpoint.objects.select_related("created_by").filter(pk=endpoint_id).first()
    if endpoint is None:
        raise NotFound(f"Webhook not found: {endpoint_id}")
    return endpoint


@api_view("GET", "POST")
def webhooks(request: HttpRequest) -> JsonResponse:
    if request.method == "GET":
        _check(request, "view")
        rows = WebhookEndpoint.objects.select_related("created_by").order_by("pk")
        return JsonResponse({"results": [endpoint_json(e) for e in rows]})
    _check(request, "add")
    fields = _validate(parse(WebhookBody, json_body(request)).model_dump())
    endpoint, generated = endpoints.webhook_save(endpoint=None, actor=request.user, **fields)
    body = endpoint_json(endpoint) | ({"secret": generated} if generated else {})
    return JsonResponse(body, status=201)


@api_view("GET", "PATCH", "DELETE")
def webhook(request: HttpRequest, endpoint_id: int) -> JsonResponse:
    perm = {"GET": "view", "PATCH": "change", "DELETE": "delete"}[request.method or "GET"]
    _check(request, perm)
    endpoint = _endpoint(endpoint_id)
    if request.method == "GET":
        return JsonResponse(endpoint_json(endpoint))
    if request.method == "DELETE":
        endpoint.delete()  # its deliveries stay (endpoint set to null): the record of what was sent
        return JsonResponse({"deleted": endpoint_id})
    fields = _validate(parse(WebhookPatch, json_body(request)).model_dump(exclude_unset=True))
    endpoint, _ = endpoints.webhook_save(endpoint=endpoint, actor=request.user, **fields)
    return JsonResponse(endpoint_json(endpoint))


@api_view("GET")
def webhook_deliveries(request: HttpRequest, endpoint_id: int) -> JsonResponse:
    """An endpoint's deliveries, newest first, each with its attempts."""
    _check(request, "view")
    endpoint = _endpoint(endpoint_id)
    size = int_param(request, "page_size", 50, high=200)
    rows = (
        Delivery.objects.filter(endpoint=endpoint)
        .select_related("event")
        .prefetch_related("attempt_log")
        .order_by("-created_at", "-id")[:size]
    )
    return JsonResponse({"results": [delivery_json(d) for d in rows]})
