"""Login throttling (django-axes, off in the rest of the suite): after ADKWEB_LOGIN_FAILURE_LIMIT (5)
failed logins for one username from one address, that pair is refused with 429 and a page that says
why and for how long, on the login page and the admin's; API tokens guessed from one address get a
JSON 429. A success resets the count; the lock ends after the cool-off."""

from __future__ import annotations

from datetime import timedelta

import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User
from django.test import Client

from agents_app.tokens import token_create


@pytest.fixture
def throttled(db, settings):
    settings.AXES_ENABLED = True
    settings.AXES_FAILURE_LIMIT = 5
    settings.AXES_COOLOFF_TIME = timedelta(minutes=15)
    return User.objects.create_user("dana", password="right-pw-1", is_staff=True, is_superuser=True)


def _login(client: Client, password: str, path: str = "/accounts/login/", username: str = "dana"):
    return client.post(path, {"username": username, "password": password})


def test_the_login_page_locks_a_username_from_an_address_after_five_failures(throttled):
    attacker = Client(REMOTE_ADDR="203.0.113.7")
    for _ in range(4):
        r = _login(attacker, "guess")
        assert r.status_code == 200 and 'class="alert error"' in r.content.decode()  # the form, with its error
    locked = _login(attacker, "guess")
    assert locked.status_code == 429
    page = locked.content.decode()
    assert "Too many failed logins" in page and "15 minutes" in page and locked["Retry-After"] == "900"
    assert "<html" in page.lower()  # a page, not a bare string
    right = _login(attacker, "right-pw-1")  # even the right password, from there, for now
    assert right.status_code == 429 and "_auth_user_id" not in attacker.session

    # Someone else at another address, and another account at this one, are not affected.
    elsewhere = Client(REMOTE_ADDR="198.51.100.2")
    assert _login(elsewhere, "right-pw-1").status_code == 302
    User.objects.create_user("erin", password="erin-pw-1")
    assert _login(attacker, "erin-pw-1", username="erin").status_code == 302

    # After the cool-off, the right password works again (and resets the count).
    AccessAttempt.objects.update(
        attempt_time=AccessAttempt.objects.get(username="dana").attempt_time - timedelta(minutes=16)
    )
    later = Client(REMOTE_ADDR="203.0.113.7")
    assert _login(later, "right-pw-1").status_code == 302
    assert not AccessAttempt.objects.filter(username="dana", ip_address="203.0.113.7").exists()


def test_a_success_resets_the_count(throttled):
    user = Client(REMOTE_ADDR="192.0.2.1")
    for _ in range(4):
        assert _login(user, "typo").status_code == 200
    assert _login(user, "right-pw-1").status_code == 302
    again = Client(REMOTE_ADDR="192.0.2.1")
    for _ in range(4):
        assert _login(again, "typo").status_code == 200  # counting from zero again: not locked at the 5th overall


def test_the_admin_login_is_throttled_too(throttled):
    attacker = Client(REMOTE_ADDR="203.0.113.8")
    for _ in range(4):
        assert _login(attacker, "guess", path="/admin/login/").status_code == 200
    locked = _login(attacker, "guess", path="/admin/login/")
    assert locked.status_code == 429 and "Too many failed logins" in locked.content.decode()
    assert _login(attacker, "right-pw-1", path="/admin/login/").status_code == 429


def test_api_tokens_are_not_passwords_a_stale_one_locks_nobody_out(throttled):
    """Tokens are 160 random bits (not guessed a few tries at a time): failures are refused with 401 and
    never counted, so a client stuck on a revoked token cannot lock out others behind its address."""
    _, key = token_create(user=throttled, name="t")
    stale = Client(REMOTE_ADDR="203.0.113.9")
    for _ in range(8):
        r = stale.get("/api/pending-calls", HTTP_AUTHORIZATION="Token not-a-real-key")
        assert r.status_code == 401 and r.json()["detail"] == "Invalid or revoked API token."
    assert not AccessAttempt.objects.exists()
    assert stale.get("/api/pending-calls", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    assert _login(stale, "right-pw-1").status_code == 302  # nor the address's page logins


def test_a_json_429_under_the_api_path(throttled, rf):
    """The lockout answer for an /api/ path is the API's `{"detail"}` shape."""
    from adkweb.throttle import lockout_response

    r = lockout_response(rf.get("/api/pending-calls"))
    assert r.status_code == 429 and r["Retry-After"] == "900"
    assert r["Content-Type"] == "application/json" and b"Too many failed logins" in r.content


def test_throttling_is_on_by_default_outside_the_tests():
    from adkweb import settings as defaults

    assert defaults.AXES_ENABLED is True and defaults.AXES_FAILURE_LIMIT == 5
    assert defaults.AUTHENTICATION_BACKENDS[0] == "axes.backends.AxesStandaloneBackend"
