"""Expiry survives a restart: the due time is in the database, not in a timer. `make run`'s server
opens a ticket under a policy with a due time, is killed, stays down past the due time, and a new
server (its embedded sweeper) expires the ticket and tells the agent, which tells the user."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.adkweb.test_embedded_server import ROOT, _free_port
from tests.live_server import text_message

POLICY = (
    "from approvals.models import Policy; "
    "Policy.objects.create(name='Fast', tool='ask_for_approval', due_in_seconds=6, priority=99)"
)


def _status(db: Path) -> str:
    """The ticket's status, read from the database file itself (no Django process running)."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT status FROM approvals_pendingcall").fetchone()[0]


def _serve(env: dict[str, str], log: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=open(log, "a"),
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{url}/accounts/login/", timeout=2)
            return server, url
        except httpx.TransportError:
            assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)


def test_a_ticket_expires_after_the_server_was_down_past_its_due_time(tmp_path):
    db = tmp_path / "db.sqlite3"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "ADKWEB_EMBEDDED_WORKER"}}
    env.update(
        DJANGO_SETTINGS_MODULE="adkweb.settings",
        DATABASE_URL=f"sqlite:///{db}",
        PYTHONPATH=str(ROOT),
        ADKWEB_DEADLINE_SWEEP_SECONDS="1",
    )

    def manage(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""

    manage("migrate", "--noinput")
    manage("demo_setup")
    manage("shell", "-c", POLICY)
    key = manage("create_api_token", "requester").splitlines()[-1]
    headers = {"Authorization": f"Token {key}"}
    log = tmp_path / "server.log"

    first, url = _serve(env, log)
    api = f"{url}/api/adk"
    session = httpx.post(f"{api}/apps/reimbursement_agent/users/requester/sessions", json={}, headers=headers).json()
    run = {"appName": "reimbursement_agent", "userId": "requester", "sessionId": session["id"]}
    opened = httpx.post(
        f"{api}/run",
        json={**run, "newMessage": text_message("Please reimburse 200$ for meals")},
        headers=headers,
        timeout=60,
    )
    assert opened.status_code == 200, opened.text
    first.send_signal(signal.SIGKILL)  # a crash: nothing in memory survives
    first.wait(timeout=20)
    assert _status(db) == "pending"

    time.sleep(7)  # past the due time, with no process running
    assert _status(db) == "pending"

    second, url = _serve(env, log)
    try:
        deadline = time.monotonic() + 60
        while _status(db) != "expired":
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        told = f"{url}/api/adk/apps/reimbursement_agent/users/requester/sessions/{session['id']}"
        expected = "Sorry, your reimbursement request of $200.00 for meals expired: nobody decided it in time."
        deadline = time.monotonic() + 60
        while True:
            events = httpx.get(told, headers=headers, timeout=20).json()["events"]
            said = [p.get("text") for e in events for p in (e.get("content") or {}).get("parts", [])]
            if expected in said:
                break
            assert time.monotonic() < deadline, (said, log.read_text()[-3000:])
            time.sleep(0.5)
        responses = [
            p["functionResponse"]["response"]
            for e in events
            if e["author"] == "user"
            for p in e["content"]["parts"]
            if "functionResponse" in p
        ]
        assert [r["status"] for r in responses] == ["expired"]
    finally:
        second.terminate()
        second.wait(timeout=20)
