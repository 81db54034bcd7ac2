"""CSRF on every unsafe endpoint, for a session-authenticated client; API tokens need none."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from tests.adkweb.security.sweep import _send, client_for, state_counts
from tests.adkweb.security.tables import targets


def _first_allowed_role(expect: dict[str, Any]) -> str | None:
    """A role that the request would otherwise succeed for (so a 403 is CSRF, not permissions)."""
    for role in ("requester", "approver", "observer", "mallory"):
        status = expect[role]
        if isinstance(status, int) and status < 400:
            return role
    return None


@pytest.mark.parametrize("cookie", [False, True], ids=["no-csrf-cookie", "cookie-but-no-token"])
def test_unsafe_requests_without_csrf_token_are_refused_everywhere(world, cookie):
    """The second variant is the real cross-site case: the browser sends the csrftoken cookie,
    the attacker's form cannot send the matching token."""
    failures: list[str] = []
    checked = 0
    for target in targets(world):
        for method, expect in target.expect.items():
            if method == "GET" or expect["requester"] == 405:
                continue  # safe, or not an endpoint for this method
            role = "anonymous" if target.name == "login" else _first_allowed_role(expect)
            if role is None and target.api:
                role = "requester"  # refused anyway: the message must say CSRF came first
            if role is None:
                continue
            checked += 1
            c = client_for(world, role, csrf=True)
            if cookie:
                c.get("/accounts/login/")  # sets the csrftoken cookie
                assert "csrftoken" in c.cookies
            with transaction.atomic():
                before = state_counts()
                response = _send(c, method, target.path, target.bodies.get(method))
                after = state_counts()
                transaction.set_rollback(True)
            where = f"{method} {target.path} ({target.label}) as {role} without a CSRF token"
            if response.status_code != 403:
                failures.append(f"{where}: got {response.status_code}, expected 403")
            elif target.api and "CSRF" not in response.content.decode():
                failures.append(f"{where}: 403 does not say it is CSRF: {response.content[:160]!r}")
            if before != after:
                failures.append(f"{where}: changed state {before} -> {after}")
    assert checked >= 15, f"only {checked} unsafe endpoints were checked"
    assert not failures, "\n".join(failures)


def test_token_in_header_passes_csrf_page_and_api(world):
    """Positive control: the same requests with the X-CSRFToken header (as htmx sends it) go through."""
    c = client_for(world, "approver", csrf=True)
    c.get(f"/tickets/{world.call.pk}/")
    token = c.cookies["csrftoken"].value
    r = c.post(
        f"/api/pending-calls/{world.call.pk}/responses",
        data=json.dumps({"response": {"status": "in_progress"}, "final": False}),
        content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert r.status_code == 201, r.content
    r = c.post(f"/tickets/{world.call.pk}/approve/", {}, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and world.call.__class__.objects.get(pk=world.call.pk).status == "approved"


def test_api_token_requests_need_no_csrf_but_a_session_cookie_does(world):
    from agents_app.tokens import token_create

    _, key = token_create(user=world.users["approver"])
    c = Client(enforce_csrf_checks=True)
    r = c.post(
        f"/api/pending-calls/{world.call.pk}/approve",
        data="{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {key}",
    )
    assert r.status_code == 201, r.content
