"""Debian's chromium for Playwright (it cannot download a browser here): shared by the browser suite
(tests/browser, uvicorn and the in-process worker) and the services-mode browser test in
tests/integration (daphne, a Celery worker process, PostgreSQL and Redis)."""

from __future__ import annotations

import os

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
