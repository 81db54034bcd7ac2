"""Browser tests: Playwright (Python) driving Debian's chromium against a live ASGI server
(uvicorn in a thread, websockets included) with the real in-process Celery worker."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.chromium import CHROMIUM, LAUNCH_ARGS, log_in, missing
from tests.conftest_live import live_asgi, live_asgi_server  # noqa: F401  (fixtures)

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"

# Playwright's sync API keeps an event loop in this thread; the test's own ORM calls are still sync.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    here = Path(__file__).parent
    reason = missing()
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.browser)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def login(browser: Any, live_asgi: Any) -> Iterator[Callable[..., Any]]:  # noqa: F811
    """login("approver") → a logged-in Page in its own browser context (its own cookies)."""
    contexts = []

    def _login(username: str, *, width: int = 1280, height: int = 860) -> Any:
        context = browser.new_context(viewport={"width": width, "height": height}, base_url=live_asgi.url)
        context.set_default_timeout(20_000)
        contexts.append(context)
        return log_in(context.new_page(), username)

    yield _login
    for context in contexts:
        context.close()


@pytest.fixture
def shot() -> Callable[[Any, str], Path]:
    """Save a full-page screenshot under test-artifacts/ (gitignored); with ADKWEB_UPDATE_SCREENSHOTS=1
    the published ones are copied to docs/screenshots/ for the README."""
    ARTIFACTS.mkdir(exist_ok=True)

    def _shot(page: Any, name: str, *, publish: bool = False) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        if publish and os.environ.get("ADKWEB_UPDATE_SCREENSHOTS"):  # the README's screenshots
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, SCREENSHOTS / f"{publish if isinstance(publish, str) else name}.png")
        return path

    return _shot
