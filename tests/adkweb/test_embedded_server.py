"""`make run`'s path, as a user gets it: `manage.py runserver` in a subprocess with no services and
no environment beyond a fresh SQLite file. The ASGI app starts its in-process Celery worker; an
ADK client drives the seed's long-running-tool loop against it over HTTP."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import wait_for
from tests.live_server import AdkClient, seed_client_loop

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def embedded_server(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, dict[str, str], Path, subprocess.Popen[bytes]]]:
    db = tmp_path_factory.mktemp("embedded") / "db.sqlite3"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "ADKWEB_EMBEDDED_WORKER"}}
    env.update(DJANGO_SETTINGS_MODULE="adkweb.settings", DATABASE_URL=f"sqlite:///{db}", PYTHONPATH=str(ROOT))

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    manage("migrate", "--noinput")
    manage("demo_setup")
    manage("demo_setup")  # idempotent, as `make run` relies on
    key = manage("create_api_token", "approver").splitlines()[-1]
    port = _free_port()
    log = open(db.parent / "server.log", "w")
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{url}/accounts/login/", timeout=2)
            break
        except httpx.TransportError:
            assert server.poll() is None and time.monotonic() < deadline, (db.parent / "server.log").read_text()
            time.sleep(0.3)
    yield url, {"Authorization": f"Token {key}"}, db, server
    if server.poll() is None:  # the last test stops it itself
        server.terminate()
        server.wait(timeout=20)
    log.close()


def test_make_run_serves_the_dashboard_and_runs_agents_in_process(embedded_server):
    url, headers, db, _ = embedded_server
    login = httpx.get(f"{url}/accounts/login/")
    assert login.status_code == 200 and "csrfmiddlewaretoken" in login.text
    assert httpx.get(f"{url}/", follow_redirects=False).status_code == 302  # login required
    assert "reimbursement_agent" in httpx.get(f"{url}/api/adk/list-apps", headers=headers).json()

    client = AdkClient(url, headers=headers, username="approver", timeout=60)
    try:
        seed_client_loop(client)  # run → ticket → answer → reimburse, through the in-process worker
        seed_client_loop(client, sse=True)
    finally:
        client.close()
    # The file is in WAL mode (readers don't wait for the worker's writes; a commit syncs the log once).
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    # Each ticket's notification fanned out once, in the server (its quiet thread: notifications.outbox).
    wait_for(lambda: _read(db, "SELECT count(*) FROM notifications_notificationevent WHERE fanned_out_at IS NULL") == 0)
    assert _read(db, "SELECT count(*) FROM notifications_notificationevent WHERE name = 'ticket.opened'") == 2
    deliveries = (
        "SELECT count(*) FROM notifications_delivery d JOIN notifications_notificationevent e ON e.id = d.event_id"
    )
    assert _read(db, f"{deliveries} WHERE e.name = 'ticket.opened'") > 0
    assert _read(db, "SELECT count(*) - count(DISTINCT event_id || ' ' || target) FROM notifications_delivery") == 0


def _read(db: Path, sql: str) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute(sql).fetchone()[0])


def test_a_form_post_is_read_by_django_under_daphne(embedded_server):
    """Daphne's Twisted requests no longer parse form bodies (adkweb.handler.daphne_bodies_unparsed):
    Django reads them, URL-encoded and multipart alike (the login form, as a browser posts it)."""
    from agents_app.demo.setup import DEMO_USERS

    url, _, _, _ = embedded_server
    username, password = DEMO_USERS[0][0], DEMO_USERS[0][1]
    for multipart in (False, True):
        with httpx.Client(base_url=url, follow_redirects=False) as browser:
            token = browser.get("/accounts/login/").text.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"')[0]
            fields = {"csrfmiddlewaretoken": token, "username": username, "password": password}
            posted = (
                browser.post("/accounts/login/", files={k: (None, v) for k, v in fields.items()})
                if multipart
                else browser.post("/accounts/login/", data=fields)
            )
            assert posted.status_code == 302, posted.text[:2000]
            assert browser.get("/").status_code == 200  # logged in


def test_stopping_the_server_stops_its_worker_cleanly(embedded_server):
    """Ctrl-C / SIGTERM on `make run`: the process ends promptly, its in-process worker stopped at exit,
    and the log holds no traceback (the worker's context, left to the garbage collector, used to print
    an ignored AttributeError). Last in this file: it stops the module's server."""
    _, _, db, server = embedded_server
    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=20) == 0
    text = (db.parent / "server.log").read_text()
    assert "Embedded Celery worker stopped." in text, text[-3000:]
    assert "Traceback" not in text and "Exception ignored" not in text, text[-3000:]
    assert "WARNING" not in text, text[-3000:]  # e.g. kombu's "No hostname was supplied" for memory://
