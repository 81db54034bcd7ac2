"""A message's writes on PostgreSQL in one round trip (agents_app.turn_insert: the person's row lock,
then the count of their active turns, the Turn's INSERT and the session's status in one statement),
raced with real requests: every message committed is stored once and run once, none is doubled or
lost, a retried request (Idempotency-Key) queues nothing more, and the per-person cap holds."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.db import connection, transaction

from agents_app import services
from agents_app.content import text_content
from agents_app.models import AdkSession, StoredEvent, Turn
from agents_app.services import TooManyTurns
from tests.live_server import text_message

pytest_plugins = ["tests.conftest_live"]
pytestmark = pytest.mark.django_db(transaction=True)

APP = "stock_agent"


def _texts(session_id: str) -> list[str]:
    """The user messages the session's runs stored (as ADK stored them), in order."""
    session = AdkSession.objects.get(session_id=session_id)
    found = StoredEvent.objects.filter(session=session, author="user").order_by("pk")
    return [p["text"] for e in found for p in (e.data.get("content") or {}).get("parts", []) if "text" in p]


def test_concurrent_runs_and_their_retries_store_and_run_each_message_once(demo, worker, adk_client, settings):
    """Twelve `/run`s at once on three sessions, each sent twice at once with its Idempotency-Key: each
    message is one turn, run once (done, one attempt), stored once as the user's event, and both copies
    of a request answer the same events of that turn's invocation; each session ends idle."""
    settings.ADKWEB_MAX_QUEUED_TURNS_PER_USER = 50  # the live server is this process: not the cap's test
    requester = demo["requester"]
    clients = [adk_client(requester) for _ in range(8)]
    sessions = [clients[0].create_session(APP)["id"] for _ in range(3)]
    jobs = [
        (sid, f"What is the price of GOOG? ({n}-{i})", f"race-{n}-{i}")
        for n, sid in enumerate(sessions)
        for i in range(4)
    ]
    sends = [job for job in jobs for _ in range(2)]  # each request twice, with one key
    start = threading.Barrier(len(clients))

    def send(k: int) -> list[tuple[tuple[str, str, str], int, Any]]:
        client = clients[k % len(clients)]
        start.wait(30)
        out = []
        for sid, text, key in sends[k :: len(clients)]:
            r = client.http.post(
                "/api/adk/run", json=client.run_body(APP, sid, text_message(text)), headers={"Idempotency-Key": key}
            )
            out.append(((sid, text, key), r.status_code, r.json()))
        return out

    with ThreadPoolExecutor(len(clients)) as pool:
        answers = [a for part in pool.map(send, range(len(clients))) for a in part]
    assert all(status == 200 for _, status, _ in answers), [a for a in answers if a[1] != 200]
    by_job: dict[tuple[str, str, str], list[Any]] = {}
    for job, _, events in answers:
        by_job.setdefault(job, []).append(events)
    assert sorted(by_job) == sorted(jobs)
    for job, copies in by_job.items():
        assert len(copies) == 2 and copies[0] == copies[1] and copies[0], job  # a retry answers the same
        assert len({e["invocationId"] for e in copies[0]}) == 1, job
    for n, sid in enumerate(sessions):
        turns = list(Turn.objects.filter(session__session_id=sid).order_by("pk"))
        assert len(turns) == 4  # one per message: no retry queued another, none lost
        assert [(t.status, t.attempts) for t in turns] == [(Turn.Status.DONE, 1)] * 4
        texts = sorted(f"What is the price of GOOG? ({n}-{i})" for i in range(4))
        assert sorted(_texts(sid)) == texts  # each message reached the agent once
        answered = {copies[0][0]["invocationId"] for (s, _, _), copies in by_job.items() if s == sid}
        assert answered == {t.invocation_id for t in turns}  # each request followed its own turn
        assert AdkSession.objects.get(session_id=sid).status == "idle"


def test_many_messages_racing_for_the_last_slots_fill_the_cap_exactly(demo, settings):
    """Eight messages of one person at once (one session each), two of three slots free: exactly two
    are queued, each once, the session status of each written with it; the six others are refused
    and leave nothing (no turn, the session idle)."""
    settings.ADKWEB_MAX_QUEUED_TURNS_PER_USER = 3
    requester = demo["requester"]
    sessions = [services.session_create(app_name=APP, user_id="requester", session_id=f"cap-{i}") for i in range(9)]
    # 1 of 3, written directly: no worker is told (a worker of an earlier test would run it and free its slot)
    Turn.objects.create(session=sessions[8], kind=Turn.Kind.MESSAGE, content={}, created_by=requester)
    start = threading.Barrier(8)
    outcome: dict[int, object] = {}

    def message(i: int) -> None:
        try:
            start.wait(30)
            with transaction.atomic():
                turn = services.turn_add(
                    session=sessions[i], content=text_content(f"m{i}"), actor=requester, enqueue=False
                )
            outcome[i] = turn.pk
        except TooManyTurns as exc:
            outcome[i] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=message, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    queued = sorted(i for i, o in outcome.items() if isinstance(o, int))
    refused = [i for i, o in outcome.items() if isinstance(o, TooManyTurns)]
    assert len(queued) == 2 and len(refused) == 6, outcome
    assert all("3 agent turns queued or running" in str(outcome[i]) for i in refused)
    turns = Turn.objects.filter(created_by=requester).exclude(session=sessions[8])
    assert sorted((t.session_id, t.pk) for t in turns) == sorted((sessions[i].pk, outcome[i]) for i in queued)
    for i in range(8):
        assert AdkSession.objects.get(pk=sessions[i].pk).status == ("running" if i in queued else "idle")


def test_a_message_rolled_back_leaves_no_turn_and_the_status_as_it_was(demo):
    """The turn and the status are written in the caller's transaction: rolled back, neither is."""
    session = services.session_create(app_name=APP, user_id="requester", session_id="rolled-back")
    with transaction.atomic():
        turn = services.turn_add(session=session, content=text_content("never"), actor=demo["requester"], enqueue=False)
        assert Turn.objects.filter(pk=turn.pk).exists()
        assert AdkSession.objects.get(pk=session.pk).status == "running"
        transaction.set_rollback(True)
    assert not Turn.objects.filter(session=session).exists()
    assert AdkSession.objects.get(pk=session.pk).status == "idle"
