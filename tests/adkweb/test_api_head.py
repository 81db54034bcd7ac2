"""HEAD on the API: what ADK's own server (Starlette, which answers HEAD wherever GET is routed)
answers, with the headers of the GET and no body; never the view's other branch (a POST's)."""

from __future__ import annotations

import httpx
from django.test import Client

from agents_app.models import AdkSession

pytest_plugins = ["tests.conftest_live"]
SESSIONS = "/api/adk/apps/stock_agent/users/requester/sessions"


def test_head_answers_as_get_without_a_body_over_http(demo, live_asgi, api_token):
    headers = api_token(demo["requester"])
    got = httpx.get(live_asgi.url + SESSIONS, headers=headers)
    head = httpx.head(live_asgi.url + SESSIONS, headers=headers)
    assert got.status_code == 200 and head.status_code == 200, head.text
    assert head.content == b""
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.headers["content-length"] == str(len(got.content))


def test_head_on_a_get_and_post_endpoint_creates_nothing(demo):
    client = Client()
    client.force_login(demo["requester"])
    assert client.head(SESSIONS).status_code == 200
    assert client.head("/api/adk/list-apps").status_code == 200
    assert not AdkSession.objects.filter(user_id="requester").exists()  # the view's POST branch did not run


def test_head_is_refused_as_get_is(demo):
    anonymous = Client()
    r = anonymous.head(SESSIONS)
    assert r.status_code == 401
    client = Client()
    client.force_login(demo["requester"])
    assert client.head("/api/adk/apps/stock_agent/users/approver/sessions").status_code == 403
    assert client.head("/api/adk/apps/nope/users/requester/sessions").status_code == 404


def test_a_method_not_allowed_names_the_allowed_ones(demo):
    client = Client()
    client.force_login(demo["requester"])
    r = client.head("/api/adk/run")  # POST only: no GET, so no HEAD
    assert r.status_code == 405 and r["Allow"] == "POST"
    r = client.delete("/api/adk/list-apps")
    assert r.status_code == 405 and r["Allow"] == "GET, HEAD"
    assert r.json() == {"detail": 'Method "DELETE" not allowed here; use GET, HEAD.'}


def test_head_on_a_streamed_export_leaves_the_request_its_database(demo):
    """The audit export streams: HEAD answered it by closing the unstarted stream with `response.close()`,
    which also sends Django's request_finished, mid-request: the thread's database connections were
    closed under the request (in the test's transaction, the next query failed: 'Cannot operate on a
    closed database'). Now the stream's resources only."""
    from django.contrib.auth.models import User
    from django.core.signals import request_finished

    finished: list[object] = []

    def count(**kwargs):
        finished.append(kwargs)

    request_finished.connect(count)
    try:
        c = Client()
        c.force_login(User.objects.get(username="admin"))
        r = c.head("/api/audit/decisions.csv")
        assert r.status_code == 200 and r.content == b""
        assert len(finished) <= 1  # the test client's own, at most: never one from inside the view
        assert User.objects.count() > 0  # the connection still there
    finally:
        request_finished.disconnect(count)
