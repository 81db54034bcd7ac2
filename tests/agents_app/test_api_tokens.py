"""API tokens (command, admin, revocation) and session auth with CSRF on the API."""

from __future__ import annotations

import io

import httpx
import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from agents_app.models import ApiToken

pytest_plugins = ["tests.conftest_live"]
SESSIONS = "/api/adk/apps/stock_agent/users/requester/sessions"


def _create(username: str, *args: str) -> str:
    out = io.StringIO()
    call_command("create_api_token", username, *args, stdout=out, stderr=io.StringIO())
    return out.getvalue().strip()


def test_command_creates_a_working_token_and_revokes_it(demo, live_asgi):
    key = _create("requester", "--name", "billing")
    token = ApiToken.objects.get()
    assert key.startswith("adkw_") and token.prefix == key[:12] and token.name == "billing"
    assert key not in token.key_hash  # only a hash is stored
    headers = {"Authorization": f"Token {key}"}
    assert httpx.get(live_asgi.url + SESSIONS, headers=headers).status_code == 200
    assert httpx.get(live_asgi.url + SESSIONS, headers={"Authorization": f"Bearer {key}"}).status_code == 200
    call_command("create_api_token", "requester", "--revoke", token.prefix, stderr=io.StringIO())
    r = httpx.get(live_asgi.url + SESSIONS, headers=headers)
    assert r.status_code == 401 and r.json() == {"detail": "Invalid or revoked API token."}
    assert r.headers["WWW-Authenticate"].startswith("Token")


def test_command_refuses_unknown_users(demo):
    with pytest.raises(CommandError, match="No user named 'ghost'"):
        _create("ghost")


def test_inactive_users_tokens_stop_working(demo, live_asgi):
    key = _create("requester")
    demo["requester"].is_active = False
    demo["requester"].save()
    assert httpx.get(live_asgi.url + SESSIONS, headers={"Authorization": f"Token {key}"}).status_code == 401


def test_admin_creates_a_token_shows_the_key_once_and_revokes(demo):
    client = Client()
    client.force_login(demo["admin"])
    r = client.post("/admin/agents_app/apitoken/add/", {"user": demo["requester"].pk, "name": "ci"}, follow=True)
    assert r.status_code == 200
    token = ApiToken.objects.get()
    shown = [str(m) for m in r.context["messages"]]
    assert any(token.prefix in m and "not be shown again" in m for m in shown)
    r = client.post("/admin/agents_app/apitoken/", {"action": "revoke", "_selected_action": [token.pk]}, follow=True)
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_session_auth_needs_the_csrf_token_for_writes(demo):
    client = Client(enforce_csrf_checks=True)
    client.force_login(demo["requester"])
    assert client.get(SESSIONS).status_code == 200  # reads need no token
    refused = client.post(SESSIONS, content_type="application/json")
    assert refused.status_code == 403 and refused.json()["detail"].startswith("CSRF failed")
    client.get("/accounts/login/")  # sets the csrftoken cookie
    csrf = client.cookies["csrftoken"].value
    assert client.post(SESSIONS, content_type="application/json", headers={"X-CSRFToken": csrf}).status_code == 200


def test_token_requests_need_no_csrf(demo, api_token):
    client = Client(enforce_csrf_checks=True)
    assert (
        client.post(SESSIONS, content_type="application/json", headers=api_token(demo["requester"])).status_code == 200
    )
