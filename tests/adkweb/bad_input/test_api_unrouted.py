"""A URL under /api/ that no endpoint's route matches (an id that is not a number, bytes that are not
UTF-8, a name no route has): Django's bare HTML "Not Found" page, where every other refusal of the API is
JSON with a `detail`. Now a JSON 404 saying no endpoint has that path; pages keep their 404."""

from __future__ import annotations

import pytest
from django.test import Client

from tests.adkweb.bad_input.sweep import Objs, _client

UNROUTED = [
    "/api/pending-calls/abc",
    "/api/pending-calls/%FF",
    "/api/pending-calls/1/approve/now",
    "/api/adk/apps/%ED%A0%80",
    "/api/adk/apps/reimbursement_agent/users/requester/sessions/s-bad/events",
    "/api/no-such-endpoint",
]


@pytest.mark.parametrize("who", ["requester", "anonymous"])
def test_an_api_path_no_endpoint_has_is_a_json_404(objs: Objs, who: str):
    c = Client() if who == "anonymous" else _client(objs, who)
    failures = []
    for path in UNROUTED:
        for method in ("GET", "POST", "DELETE"):
            r = c.generic(method, path, "{}", content_type="application/json")
            detail = r.json().get("detail", "") if r.get("Content-Type", "").startswith("application/json") else ""
            if r.status_code != 404 or "no API endpoint" not in detail:
                failures.append(f"{method} {path}: {r.status_code} {r.content[:120]!r}")
    assert not failures, "\n".join(failures)


def test_a_page_path_no_view_has_stays_a_page_404(objs: Objs):
    r = _client(objs, "requester").get("/no-such-page/")
    assert r.status_code == 404 and not r["Content-Type"].startswith("application/json")
