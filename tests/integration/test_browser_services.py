"""The whole product as a deployment runs it, in a real browser: Debian's chromium against a `daphne`
process with the production settings (DEBUG off, collected static files), a `celery worker` process,
PostgreSQL and Redis. The browser suite (tests/browser) runs uvicorn with the in-process worker; under
daphne the Redis layer's reader writes live frames to the sockets directly (adkweb.channel_layers), so
this is the test of what an approver and a requester see on the production stack."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from approvals.models import PendingCall
from tests.chromium import CHROMIUM, LAUNCH_ARGS, log_in, missing

from . import processes

pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")


@pytest.fixture(scope="module")
def daphne_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    static_root = tmp_path_factory.mktemp("static")
    env = processes.service_env(
        settings.REDIS_URL, DJANGO_DEBUG="false", ADKWEB_STATIC_MANIFEST="1", ADKWEB_STATIC_ROOT=str(static_root)
    )
    collect = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=processes.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert collect.returncode == 0, collect.stderr
    port = processes.free_port()
    args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "adkweb.asgi:application"]
    web = processes.Service(args, env, ready="Listening on TCP address").start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        web.stop()


def _production_passwords(users: dict[str, Any]) -> None:
    """The test settings hash passwords with MD5 (fast), which the production settings daphne runs
    with do not accept: store the demo passwords with the production hasher."""
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    hasher = PBKDF2PasswordHasher()
    for name, user in users.items():
        user.password = hasher.encode(f"{name}-demo", hasher.salt(), iterations=1000)
        user.save(update_fields=["password"])


@pytest.fixture
def login(demo: dict[str, Any], daphne_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """login("approver") → a logged-in Page of its own browser context (its own cookies), through
    the login form."""
    from playwright.sync_api import sync_playwright

    _production_passwords(demo)

    # Playwright's sync API runs a loop in this thread; the test's own ORM reads are still sync.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)

        def _login(username: str) -> Any:
            context = browser.new_context(viewport={"width": 1280, "height": 860}, base_url=daphne_url)
            context.set_default_timeout(30_000)
            return log_in(context.new_page(), username)

        try:
            yield _login
        finally:
            # The test's ORM calls made while Playwright's loop runs in this thread had a connection
            # of that context's own: close it here, or it keeps the test database from being dropped.
            connections.close_all()
            browser.close()


def test_ask_then_approve_live_on_daphne_with_a_worker_process(demo, worker, login):
    from playwright.sync_api import expect

    approver = login("approver")
    approver.goto("/")
    expect(approver.locator("#inbox-results[data-ws-open]")).to_have_count(1)
    expect(approver.locator("#nav-open-count")).to_have_text("0")

    requester = login("requester")
    requester.goto("/sessions/new/")
    requester.get_by_label("Agent").select_option("reimbursement_agent")
    requester.get_by_label("First message").fill("Please reimburse 200$ for meals")
    requester.get_by_role("button", name="Start conversation").click()
    requester.wait_for_url(re.compile(r"/sessions/\d+/$"))
    expect(requester.locator("#conversation-events")).to_contain_text("Please reimburse 200$ for meals")

    # The worker process opens the ticket; daphne puts it in the already-open inbox, no reload.
    row = approver.locator("#inbox-rows tr", has_text="meals · $200.00")
    expect(row).to_be_visible()
    expect(row).to_contain_text("requester")
    expect(approver.locator("#nav-open-count")).to_have_text("1")
    expect(requester.locator("#conversation-events")).to_contain_text("waiting for a human")

    approver.get_by_role("link", name="meals · $200.00").click()
    approver.wait_for_url(re.compile(r"/tickets/\d+/$"))
    expect(approver.locator(".ticket-grid[data-ws-open]")).to_have_count(1)
    approver.get_by_label("Comment (optional)").fill("Receipts checked")
    approver.get_by_role("button", name="Approve").click()  # an htmx POST: its CSRF token is the page's
    expect(approver.locator("#ticket-status")).to_contain_text("Approved by approver")

    # The worker resumes the agent; both open pages get the reply live.
    done = "Done: I reimbursed $200.00 for meals."
    expect(requester.locator("#conversation-events")).to_contain_text(done)
    expect(approver.locator("#conversation-events")).to_contain_text(done)
    expect(requester.locator("#conversation-events")).not_to_contain_text("waiting for a human")

    call = PendingCall.objects.get()
    assert call.status == "approved"
    response = call.responses.get()
    assert response.final and response.actor.username == "approver" and response.comment == "Receipts checked"
