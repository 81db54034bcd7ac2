"""The same webhook URL registered at once by many requests, against a real server on PostgreSQL: exactly
one endpoint is made (the database's constraint: a check before the INSERT alone lets concurrent requests
each find none), every other request is 409 naming it, nobody gets a 500."""

from __future__ import annotations

from collections import Counter

from notifications.models import WebhookEndpoint
from tests.integration.races import post_at_once

pytest_plugins = ["tests.conftest_live"]

N = 24
URL = "https://hooks.example.com/race"


def test_concurrent_registrations_of_one_url_make_exactly_one_endpoint(demo, live_asgi, api_token):
    token = api_token(demo["admin"])
    requests = [
        {"label": f"hook {i}", "url": "/api/webhooks", "headers": token}
        | {"json": {"url": URL, "events": ["ticket.opened"] if i % 2 else ["ticket.decided"], "name": f"hook {i}"}}
        for i in range(N)
    ]
    results = [(status, text) for _, status, text in post_at_once(live_asgi.url, requests)]

    statuses = Counter(status for status, _ in results)
    endpoint = WebhookEndpoint.objects.get()  # exactly one
    assert statuses == {201: 1, 409: N - 1}, (statuses, [t[:200] for s, t in results if s >= 500])
    for status, text in results:
        if status == 409:
            assert f"Webhook endpoint #{endpoint.pk} ({endpoint.name}) already has this URL" in text, text[:300]
