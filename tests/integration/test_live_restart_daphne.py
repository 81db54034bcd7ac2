"""In a real browser against daphne (production settings, PostgreSQL, Redis): an approver's inbox and a
ticket page stay true across a restart of the web process. While daphne is down a ticket is opened and
the open one gets an update; once it is back, htmx's ws extension reconnects both pages, and the inbox
shows the new ticket (approvals.consumers' catch-up, static/js/app.js), the ticket page the update, once,
and nothing twice."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.db import connections

from approvals import services
from tests.approvals.policy_helpers import open_ticket
from tests.chromium import CHROMIUM, LAUNCH_ARGS, log_in, missing

from . import processes
from .test_browser_services import _production_passwords

pytestmark = [
    pytest.mark.skipif(missing() is not None, reason=missing() or ""),
    pytest.mark.django_db(transaction=True),
]


@pytest.fixture
def daphne(tmp_path: Any) -> Iterator[tuple[processes.Service, str]]:
    env = processes.service_env(
        settings.REDIS_URL, DJANGO_DEBUG="false", ADKWEB_STATIC_MANIFEST="1", ADKWEB_STATIC_ROOT=str(tmp_path)
    )
    collect = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"], cwd=processes.ROOT, env=env, capture_output=True
    )
    assert collect.returncode == 0, collect.stderr
    port = processes.free_port()
    args = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "adkweb.asgi:application"]
    web = processes.Service(args, env, ready="Listening on TCP address").start()
    try:
        yield web, f"http://127.0.0.1:{port}"
    finally:
        web.stop()


def test_an_inbox_and_a_ticket_page_back_from_a_restart_show_what_happened_meanwhile(demo, daphne, monkeypatch):
    from playwright.sync_api import expect, sync_playwright

    web, url = daphne
    _production_passwords(demo)
    ticket = open_ticket(args={"purpose": "taxi", "amount": 300.0})
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        try:
            context = browser.new_context(base_url=url)
            context.set_default_timeout(60_000)
            inbox = log_in(context.new_page(), "approver")
            inbox.goto("/")
            page = context.new_page()
            page.goto(f"/tickets/{ticket.pk}/")
            expect(inbox.locator("#inbox-results[data-ws-open]")).to_have_count(1)
            expect(page.locator(".ticket-grid[data-ws-open]")).to_have_count(1)

            web.stop()  # the web process restarts: both sockets drop
            expect(inbox.locator("#inbox-results[data-ws-open]")).to_have_count(0)
            services.ticket_update(ticket=ticket, actor=demo["approver2"], message="checking the receipts")
            new = open_ticket(args={"purpose": "bus", "amount": 150.0})
            web.start()

            back = 60_000  # ms: the extension's reconnect backs off while the server is away
            expect(inbox.locator(f"#pending-call-{new.pk}")).to_be_visible(timeout=back)
            expect(inbox.locator("#nav-open-count")).to_have_text("2")
            expect(page.locator("#ticket-history li", has_text="checking the receipts")).to_have_count(1, timeout=back)
            ids = inbox.eval_on_selector_all("#inbox-rows tr[id]", "rows => rows.map(r => r.id)")
            assert ids == [f"pending-call-{new.pk}", f"pending-call-{ticket.pk}"], ids
        finally:
            connections.close_all()
            browser.close()
