"""`/api/webhooks`: admins register endpoints; bodies validated; the secret is write-only."""

from __future__ import annotations

import pytest

from notifications.api_routes import Webhook, WebhookDeliveryList, WebhookList
from notifications.models import Delivery, DeliveryAttempt, NotificationEvent, WebhookEndpoint
from tests.notifications.conftest import post


def test_admin_creates_lists_reads_updates_and_deletes_a_webhook(admin_client):
    r = post(admin_client, "/api/webhooks", {"url": "https://hooks.example.com/a", "events": ["ticket.opened"]})
    assert r.status_code == 201, r.content
    created = Webhook.model_validate(r.json()).model_dump()  # the documented (OpenAPI) shape, exactly
    assert len(created["secret"]) >= 32, "a generated secret is returned once"
    endpoint = WebhookEndpoint.objects.get()
    assert (
        endpoint.secret == created["secret"] and endpoint.format == "json" and endpoint.created_by.username == "admin"
    )
    listed = WebhookList.model_validate(admin_client.get("/api/webhooks").json()).model_dump(exclude_unset=True)[
        "results"
    ]
    assert [e["id"] for e in listed] == [endpoint.pk] and "secret" not in listed[0]
    assert "secret" not in admin_client.get(f"/api/webhooks/{endpoint.pk}").json()
    r = post(admin_client, f"/api/webhooks/{endpoint.pk}", {"format": "slack", "enabled": False}, method="patch")
    assert r.status_code == 200 and r.json()["format"] == "slack" and r.json()["enabled"] is False
    own = post(
        admin_client, "/api/webhooks", {"url": "http://93.184.215.14/h", "secret": "x" * 16, "events": ["turn.failed"]}
    )
    assert own.status_code == 201 and "secret" not in own.json()
    assert admin_client.delete(f"/api/webhooks/{endpoint.pk}").json() == {"deleted": endpoint.pk}
    assert admin_client.get(f"/api/webhooks/{endpoint.pk}").status_code == 404


@pytest.mark.parametrize(
    "body, detail",
    [
        ({"url": "ftp://example.com/x", "events": ["ticket.opened"]}, "url: enter a valid http:// or https:// URL."),
        ({"url": "not a url", "events": ["ticket.opened"]}, "url: enter a valid"),
        ({"url": "https://e.com/h", "events": ["ticket.burned"]}, "events: unknown ticket.burned"),
        ({"url": "https://e.com/h", "events": []}, "events: List should have at least 1 item"),
        ({"url": "https://e.com/h", "events": ["ticket.opened"], "format": "xml"}, "format: Input should be"),
        ({"url": "https://e.com/h", "events": ["ticket.opened"], "secret": "short"}, "secret: String should have"),
        ({"url": "https://e.com/h", "events": ["ticket.opened"], "colour": "red"}, "colour: Extra inputs"),
        ({"events": ["ticket.opened"]}, "url: Field required"),
    ],
)
def test_bad_bodies_are_400_with_a_clear_detail(admin_client, body, detail):
    r = post(admin_client, "/api/webhooks", body)
    assert r.status_code == 400 and detail in r.json()["detail"], r.json()
    assert not WebhookEndpoint.objects.exists()


def test_others_get_403_and_anonymous_401(demo, client):
    for who in ("approver", "requester", "observer", "agentadmin"):
        client.force_login(demo[who])
        r = post(client, "/api/webhooks", {"url": "https://e.com/h", "events": ["ticket.opened"]})
        assert r.status_code == 403 and "Only admins manage webhooks" in r.json()["detail"]
        assert client.get("/api/webhooks").status_code == 403
    client.logout()
    assert client.get("/api/webhooks").status_code == 401


def test_a_group_granted_the_permissions_manages_webhooks(demo, client):
    from django.contrib.auth.models import Group, Permission

    ops = Group.objects.create(name="ops")
    ops.permissions.set(Permission.objects.filter(codename__in=["view_webhookendpoint", "add_webhookendpoint"]))
    demo["observer"].groups.add(ops)
    client.force_login(demo["observer"])
    assert post(client, "/api/webhooks", {"url": "https://e.com/h", "events": ["ticket.opened"]}).status_code == 201
    assert client.delete(f"/api/webhooks/{WebhookEndpoint.objects.get().pk}").status_code == 403


def test_deliveries_of_an_endpoint_list_each_attempt(admin_client):
    from django.utils import timezone

    endpoint = WebhookEndpoint.objects.create(url="https://e.com/h", secret="s" * 20, events=["ticket.opened"])
    event = NotificationEvent.objects.create(name="ticket.opened")
    d = Delivery.objects.create(event=event, channel="webhook", endpoint=endpoint, target=endpoint.url, attempts=2)
    for n, ok in ((1, False), (2, True)):
        DeliveryAttempt.objects.create(
            delivery=d, number=n, started_at=timezone.now(), ok=ok, status_code=204 if ok else 500
        )
    rows = WebhookDeliveryList.model_validate(admin_client.get(f"/api/webhooks/{endpoint.pk}/deliveries").json())
    rows = rows.model_dump()["results"]
    assert rows[0]["id"] == str(d.uuid) and rows[0]["event"] == "ticket.opened"
    assert [(a["number"], a["ok"], a["status_code"]) for a in rows[0]["attempt_log"]] == [
        (1, False, 500),
        (2, True, 204),
    ]
