"""Several conversations' turns drained at once on one SQLite file, in embedded mode's real concurrency
(the live server's eager slots and the in-process worker's threads, each drain on its own loop with its
own sqlite3 connection: agents_app.session_sqlite_loop), while the web writes beside them (tickets
decided over the approvals API, messages sent over `/run`): every request answers promptly, far under
the file's 20 s lock timeout (no writer waits for another that waits for it), and every event is
stored exactly once."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import httpx
import pytest

from agents_app import eager
from agents_app.models import StoredEvent, Turn
from approvals.models import PendingCall
from tests.conftest import wait_for
from tests.live_server import (
    AdkClient,
    function_response,
    function_response_message,
    long_running_call,
    text_message,
    texts,
)

pytest_plugins = ["tests.conftest_live"]
APP = "reimbursement_agent"
PROMPT = 8.0  # seconds: a request that waited for the file's lock would take 20


@pytest.fixture
def concurrent(settings, monkeypatch):
    settings.ADKWEB_EAGER_RUN, settings.ADKWEB_EAGER_SLOTS = True, 2  # more /runs at once than slots: the
    settings.ADKWEB_API_RUN_TIMEOUT = 30  # rest go to the worker's two threads
    yield
    wait_for(lambda: eager.busy() == 0, timeout=30, what="the eager drains to end")


def _timed(took: list[float], fn: Any, *args: Any, **kwargs: Any) -> Any:
    start = time.monotonic()
    try:
        return fn(*args, **kwargs)
    finally:
        took.append(time.monotonic() - start)


def _over_run(client: AdkClient, took: list[float], out: dict[str, Any]) -> None:
    """The seed's loop over `/run`: the message, then the ticket's answer sent back over `/run`."""
    session = _timed(took, client.create_session, APP)
    out["session"] = session["id"]
    first = _timed(took, client.run, APP, session["id"], text_message("Please reimburse 200$ for meals"))
    assert first.status_code == 200, first.text
    call = long_running_call(first.json())
    ticket = function_response(first.json(), call["id"])["response"]["ticket-id"]
    answer = function_response_message(call["id"], call["name"], {"status": "approved", "ticket-id": ticket})
    second = _timed(took, client.run, APP, session["id"], answer)
    assert second.status_code == 200, second.text
    out["events"] = [e["id"] for e in first.json() + second.json()]
    assert any("reimbursed $200.00 for meals" in t for t in texts(second.json()))


def _decided(client: AdkClient, approver: httpx.Client, took: list[float], out: dict[str, Any]) -> None:
    """The message over `/run`, then its ticket approved over the approvals API (the resumed turn goes to
    the worker while the other conversations' drains run)."""
    session = _timed(took, client.create_session, APP)
    out["session"] = session["id"]
    first = _timed(took, client.run, APP, session["id"], text_message("Please reimburse 200$ for meals"))
    assert first.status_code == 200, first.text
    call = long_running_call(first.json())
    ticket = PendingCall.objects.get(call_id=call["id"])
    r = _timed(took, approver.post, f"/api/pending-calls/{ticket.pk}/approve", json={"comment": "fine"})
    assert r.status_code == 201, r.text
    out["events"] = [e["id"] for e in first.json()]


def test_drains_at_once_and_web_writes_on_one_sqlite_file(demo, worker, concurrent, adk_client, api_token, live_asgi):
    from django.db import connection

    if connection.vendor != "sqlite":
        pytest.skip("embedded mode's SQLite file")
    approver = httpx.Client(base_url=live_asgi.url, headers=api_token(demo["approver"]), timeout=60)
    flows: list[tuple[str, Any, dict[str, Any], list[float]]] = []
    for n in range(6):
        client = adk_client(demo["approver"])
        if n % 2:
            flows.append(("decided", lambda out, took, c=client: _decided(c, approver, took, out), {}, []))
        else:
            flows.append(("run", lambda out, took, c=client: _over_run(c, took, out), {}, []))
    gate = threading.Barrier(len(flows))
    errors: list[BaseException] = []

    def go(fn: Any, out: dict[str, Any], took: list[float]) -> None:
        try:
            gate.wait()
            fn(out, took)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(fn, out, took)) for _, fn, out, took in flows]
    try:
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
    finally:
        approver.close()
    assert not any(t.is_alive() for t in threads), "a flow did not finish in 60 s"
    assert not errors, errors
    slowest = max(max(took) for *_, took in flows)
    assert slowest < PROMPT, f"a request took {slowest:.1f} s: it waited for the file's lock"

    wait_for(
        lambda: not Turn.objects.filter(status__in=["queued", "running"]).exists(), timeout=PROMPT, what="every turn"
    )
    assert set(Turn.objects.values_list("status", "attempts")) == {("done", 1)}
    assert Turn.objects.count() == 2 * len(flows)
    counts: dict[str, set[int]] = {"run": set(), "decided": set()}
    for kind, _, out, _ in flows:
        stored = list(StoredEvent.objects.filter(session__session_id=out["session"]).values_list("event_id", flat=True))
        twice = [e for e, n in Counter(stored).items() if n > 1]
        assert not twice, f"events stored twice in {kind} {out['session']}: {twice}"
        assert set(out["events"]) <= set(stored)  # each event the client saw, stored (once: above)
        counts[kind].add(len(stored))
        said = StoredEvent.objects.filter(session__session_id=out["session"], data__icontains="reimbursed $200.00")
        assert said.count() >= 1
    assert len(counts["run"]) == 1 and len(counts["decided"]) == 1, counts  # the same events in each flow of a kind
    assert PendingCall.objects.filter(status="approved").count() == len(flows)
