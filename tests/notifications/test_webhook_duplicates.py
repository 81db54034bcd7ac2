"""One webhook endpoint per URL: the same URL registered twice got every event twice. Now a second is
refused (409 naming the first) on the API and the admin's form; the database holds it among enabled
endpoints (migration 0004's constraint); migration 0003 merges the duplicates a database already has."""

from __future__ import annotations

from importlib import import_module

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, transaction

from notifications.models import WebhookEndpoint
from tests.notifications.conftest import post

URL = "https://hooks.example.com/a"


def test_the_same_url_twice_on_the_api_is_409_naming_the_endpoint(admin_client):
    first = post(admin_client, "/api/webhooks", {"url": URL, "events": ["ticket.opened"], "name": "Ops"})
    assert first.status_code == 201, first.content
    pk = first.json()["id"]
    again = post(admin_client, "/api/webhooks", {"url": URL, "events": ["ticket.decided"], "format": "slack"})
    assert again.status_code == 409, again.content
    assert again.json()["detail"] == (
        f"Webhook endpoint #{pk} (Ops) already has this URL; one endpoint per URL: change that one's events instead."
    )
    other = post(admin_client, "/api/webhooks", {"url": URL + "/b", "events": ["ticket.opened"]}).json()["id"]
    moved = post(admin_client, f"/api/webhooks/{other}", {"url": URL}, method="patch")
    assert moved.status_code == 409 and f"#{pk} (Ops)" in moved.json()["detail"]
    # its events are edited instead; the endpoint's own URL sent again is no change
    edited = post(
        admin_client, f"/api/webhooks/{pk}", {"url": URL, "events": ["ticket.opened", "ticket.decided"]}, "patch"
    )
    assert edited.status_code == 200 and edited.json()["events"] == ["ticket.opened", "ticket.decided"]
    # a disabled endpoint keeps its URL too: enable and edit it, not another
    assert post(admin_client, f"/api/webhooks/{pk}", {"enabled": False}, "patch").status_code == 200
    again = post(admin_client, "/api/webhooks", {"url": URL, "events": ["ticket.opened"]})
    assert again.status_code == 409 and f"#{pk} (Ops) (disabled) already has this URL" in again.json()["detail"]
    assert sorted(WebhookEndpoint.objects.values_list("url", flat=True)) == [URL, URL + "/b"]
    # deleted: the URL is free again
    assert admin_client.delete(f"/api/webhooks/{pk}").status_code == 200
    assert post(admin_client, "/api/webhooks", {"url": URL, "events": ["ticket.opened"]}).status_code == 201


def test_enabling_a_second_endpoint_at_an_enabled_ones_url_is_409(admin_client):
    leftover = WebhookEndpoint.objects.create(url=URL, secret="s" * 20, events=["ticket.opened"], enabled=False)
    live = WebhookEndpoint.objects.create(url=URL, secret="s" * 20, events=["ticket.opened"], name="Live")
    r = post(admin_client, f"/api/webhooks/{leftover.pk}", {"enabled": True}, "patch")
    assert r.status_code == 409 and f"Webhook endpoint #{live.pk} (Live) already has this URL" in r.json()["detail"]
    leftover.refresh_from_db()
    assert not leftover.enabled


def test_the_admin_form_shows_the_refusal_and_saves_nothing(admin_client):
    existing = WebhookEndpoint.objects.create(url=URL, secret="s" * 20, events=["ticket.opened"], name="Ops")
    form = {"name": "x", "url": URL, "events": ["ticket.decided"], "format": "json", "enabled": "on"}
    r = admin_client.post("/admin/notifications/webhookendpoint/add/", form)
    assert r.status_code == 200 and "errorlist" in r.content.decode()
    assert f"Webhook endpoint #{existing.pk} (Ops) already has this URL" in r.content.decode()
    assert WebhookEndpoint.objects.count() == 1
    r = admin_client.post(f"/admin/notifications/webhookendpoint/{existing.pk}/change/", {**form, "name": "Ops"})
    assert r.status_code == 302  # its own URL is no duplicate


def test_the_database_refuses_a_second_enabled_endpoint_at_a_url(db):
    WebhookEndpoint.objects.create(url=URL, secret="s" * 20, events=["ticket.opened"])
    with pytest.raises(IntegrityError), transaction.atomic():
        WebhookEndpoint.objects.create(url=URL, secret="t" * 20, events=["ticket.decided"])
    WebhookEndpoint.objects.create(url=URL, secret="t" * 20, events=["ticket.decided"], enabled=False)
    long_url = "https://hooks.example.com/" + "é" * 1950  # 3,900 bytes: past PostgreSQL's limit for an index entry
    WebhookEndpoint.objects.create(url=long_url, secret="s" * 20, events=["ticket.opened"])


def test_the_migration_merges_duplicates_keeping_the_oldest(admin_client):
    (constraint,) = WebhookEndpoint._meta.constraints
    editor = connection.schema_editor()
    with connection.cursor() as cursor:
        cursor.execute(str(constraint.remove_sql(WebhookEndpoint, editor)))
    make = WebhookEndpoint.objects.create
    oldest = make(url=URL, secret="a" * 20, events=["ticket.opened"], name="Ops")
    second = make(url=URL, secret="b" * 20, events=["ticket.decided", "ticket.opened"], format="slack")
    disabled = make(url=URL, secret="c" * 20, events=["turn.failed"], enabled=False)
    third = make(url=URL, secret="d" * 20, events=["ticket.expired"], name="x" * 100)
    elsewhere = make(url=URL + "/b", secret="e" * 20, events=["ticket.opened"])
    import_module("notifications.migrations.0003_webhook_one_url").merge_duplicates(apps, None)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":  # (migration 0004 runs in a transaction of its own)
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")
        cursor.execute(str(constraint.create_sql(WebhookEndpoint, editor)))
    rows = {e.pk: e for e in WebhookEndpoint.objects.all()}
    kept = rows[oldest.pk]
    assert kept.enabled and (kept.secret, kept.format, kept.name) == ("a" * 20, "json", "Ops")
    assert kept.events == ["ticket.opened", "ticket.decided", "ticket.expired"]  # each event still reaches it, once
    note = f"duplicate of webhook #{oldest.pk} (disabled by migration 0003)"
    assert (rows[second.pk].enabled, rows[second.pk].name) == (False, note)
    assert not rows[third.pk].enabled and rows[third.pk].name.endswith(note) and len(rows[third.pk].name) == 100
    assert (rows[disabled.pk].enabled, rows[disabled.pk].name) == (False, "")  # already disabled: left as it was
    assert rows[elsewhere.pk].enabled
    page = admin_client.get("/admin/notifications/webhookendpoint/").content.decode()
    assert note in page
