"""Services mode serves the Django admin styled: `collectstatic` (compressed copies with hashed names,
ServeStatic's manifest storage) and a real `daphne` with the production settings (DEBUG off), the
pages linking the hashed files and ServeStatic answering them with long cache headers."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from django.conf import settings

from tests.integration.processes import ROOT, free_port, service_env


@pytest.fixture(scope="module")
def daphne_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    static_root = tmp_path_factory.mktemp("static")
    env = service_env(
        settings.REDIS_URL,
        DJANGO_DEBUG="false",
        ADKWEB_STATIC_MANIFEST="1",
        ADKWEB_STATIC_ROOT=str(static_root),
    )
    collect = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert collect.returncode == 0, collect.stderr
    assert (static_root / "staticfiles.json").exists()
    port = free_port()
    log = static_root.parent / "daphne.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "adkweb.asgi:application"],
        cwd=ROOT,
        env=env,
        stdout=open(log, "w"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                httpx.get(f"{url}/healthz", timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.3)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)


def _stylesheets(html: str) -> list[str]:
    return re.findall(r'<link[^>]+rel="stylesheet"[^>]+href="([^"]+)"', html) + re.findall(
        r'<link[^>]+href="([^"]+\.css)"[^>]+rel="stylesheet"', html
    )


def test_the_admin_is_styled_under_daphne_with_hashed_cached_files(daphne_url):
    page = httpx.get(f"{daphne_url}/admin/login/")
    assert page.status_code == 200
    sheets = _stylesheets(page.text)
    base = next(s for s in sheets if s.startswith("/static/admin/css/base."))
    assert re.fullmatch(r"/static/admin/css/base\.[0-9a-f]{12}\.css", base), sheets  # the hashed name
    css = httpx.get(daphne_url + base, headers={"Accept-Encoding": "gzip"})
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert "immutable" in css.headers["cache-control"] and "max-age=315360000" in css.headers["cache-control"]
    assert css.headers.get("content-encoding") == "gzip" and "body" in css.text  # the compressed copy
    for sheet in sheets:  # every stylesheet the admin links is there
        assert httpx.get(daphne_url + sheet).status_code == 200, sheet


def test_the_apps_own_pages_link_their_hashed_files(daphne_url):
    page = httpx.get(f"{daphne_url}/accounts/login/")
    assert page.status_code == 200
    app_css = next(s for s in _stylesheets(page.text) if "/css/app." in s)
    assert re.fullmatch(r"/static/css/app\.[0-9a-f]{12}\.css", app_css)
    assert ".topbar" in httpx.get(daphne_url + app_css).text
    scripts = re.findall(r'<script[^>]+src="(/static/[^"]+)"', page.text)
    assert scripts and all(httpx.get(daphne_url + s).status_code == 200 for s in scripts)
    plain = httpx.get(f"{daphne_url}/static/css/app.css")  # unhashed names are served, with a short cache
    assert plain.status_code == 200 and plain.headers["cache-control"] == "max-age=3600, public"
    assert httpx.get(f"{daphne_url}/static/nope.css").status_code == 404
    assert httpx.get(f"{daphne_url}/static/../manage.py").status_code == 404


def test_collectstatic_is_what_serves_them(daphne_url, tmp_path):
    """Without its manifest the production storage refuses to render a page (so a deployment that
    forgot collectstatic fails loudly at its first page instead of serving an unstyled admin)."""
    env = service_env(settings.REDIS_URL, ADKWEB_STATIC_MANIFEST="1", ADKWEB_STATIC_ROOT=str(tmp_path / "none"))
    code = "import django; django.setup(); from django.templatetags.static import static; print(static('css/app.css'))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert done.returncode != 0 and "Missing staticfiles manifest entry" in done.stderr
