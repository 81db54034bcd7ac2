"""`/run` and `/run_sse` authenticate in the thread hop of their own first reads (`api_view(...,
auth_in_view=True)`): what a caller sees must be what every API view gives. Without credentials, with
a bad or revoked token, or with a session cookie and no CSRF token: 401/403 before anything about the
body is said, nothing queued, no events."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from django.test import Client, RequestFactory

from adkweb.api import api_view
from agents_app import services
from agents_app.models import ApiToken, StoredEvent, Turn
from tests.live_server import text_message

pytest_plugins = ["tests.conftest_live"]
PATHS = ("/api/adk/run", "/api/adk/run_sse")


def _body(session_id: str) -> dict:
    return {"appName": "stock_agent", "userId": "requester", "sessionId": session_id, "newMessage": text_message("hi")}


@pytest.mark.parametrize("path", PATHS)
def test_run_refuses_callers_it_cannot_authenticate_and_queues_nothing(demo, live_asgi, api_token, path):
    session = services.session_create(app_name="stock_agent", user_id="requester")
    url, body = live_asgi.url + path, _body(session.session_id)
    r = httpx.post(url, json=body)
    assert r.status_code == 401 and "Authorization: Token" in r.json()["detail"]
    assert r.headers["WWW-Authenticate"].startswith("Token")
    # Authentication first: a body that is not even JSON still gets the 401, not a 400 about the body.
    r = httpx.post(url, content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 401
    assert httpx.post(url, json=body, headers={"Authorization": "Token nope"}).json() == {
        "detail": "Invalid or revoked API token."
    }
    headers = api_token(demo["requester"])
    ApiToken.objects.update(revoked_at="2026-01-01T00:00:00Z")
    assert httpx.post(url, json=body, headers=headers).status_code == 401
    # A logged-in browser without the CSRF token: refused like any other cookie-authenticated write.
    browser = Client()
    browser.force_login(demo["requester"])
    cookies = {"sessionid": browser.cookies["sessionid"].value}
    r = httpx.post(url, json=body, cookies=cookies)
    assert r.status_code == 403 and r.json()["detail"].startswith("CSRF failed")
    assert not Turn.objects.exists() and not StoredEvent.objects.filter(session=session).exists()


def test_a_view_that_defers_auth_and_never_does_it_answers_500_not_its_answer(db):
    @api_view("POST", auth_in_view=True)
    async def forgetful_json(request):
        from django.http import JsonResponse

        return JsonResponse({"secret": "data"})

    request = RequestFactory().post("/x", data=b"{}", content_type="application/json")
    response = asyncio.run(forgetful_json(request))
    assert response.status_code == 500 and b"secret" not in response.content


def test_auth_in_view_is_for_async_views_only():
    with pytest.raises(TypeError):

        @api_view("POST", auth_in_view=True)
        def sync_view(request):  # pragma: no cover - refused when decorated
            return None
