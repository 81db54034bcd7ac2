"""Debian's chromium for Playwright (it cannot download a browser here): shared by the browser suite
(tests/browser, uvicorn and the in-process worker) and the services-mode browser test in
tests/integration (daphne, a Celery worker process, PostgreSQL and Redis)."""

from __future__ import annotations

import os
from typing import Any

CHROMIUM = "/usr/bin/chromium"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def missing() -> str | None:
    """Why no browser test can run here, or None."""
    if not os.path.exists(CHROMIUM):
        return f"{CHROMIUM} is missing (CI installs it: apt-get install -y chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright (Python) is not installed"
    return None


def log_in(page: Any, username: str) -> Any:
    """Log a demo user in through the login form (password `<username>-demo`); the page, logged in."""
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", f"{username}-demo")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "/accounts/login/" not in url)
    return page
