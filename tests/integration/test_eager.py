"""Eager runs (agents_app.eager, ADKWEB_EAGER_RUN): the web process that answers ADK's `/run` runs the
turn's drain itself. Real processes on a Redis of the test's own: `daphne` serving adkweb in
services mode, `celery worker` and `celery beat` started when a test needs them; default engine
settings. What a deployment relies on: a `/run` answers with no worker running at all and no
wake-up sent, with the events the worker path answers and one ticket; a web process SIGKILLed in
the middle of an eager turn loses nothing (the sweeper has a worker finish it once); with no slot
free, eager off, or the session's lease held by a worker, the turn goes to a worker and none is
stranded; two concurrent `/run`s on one session each get their own turn, run once."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from agents_app import services
from agents_app.models import AdkSession, StoredEvent, Turn
from agents_app.tokens import token_create
from approvals.models import PendingCall
from tests.conftest import wait_for
from tests.engine_scenarios import crashy, dialogue

from . import processes

pytestmark = pytest.mark.django_db(transaction=True)
KEY = "adkweb:wake:agents"
SLOW = 4.0  # seconds a `slow` turn's tool sleeps
DAPHNE = str(Path(sys.executable).parent / "daphne")


class Stack:
    def __init__(
        self, env: dict[str, str], server: processes.RedisServer, token: str, started: list[processes.Service]
    ) -> None:
        self.env, self.server, self.token, self.started = env, server, token, started
        self.redis = redis.Redis.from_url(server.url)

    def start(self, kind: str, **extra: str) -> processes.Service:
        env = {**self.env, **extra}
        service = processes.worker(env) if kind == "worker" else processes.beat(env)
        self.started.append(service.start())
        return service

    def web(self, **extra: str) -> tuple[processes.Service, httpx.Client]:
        port = processes.free_port()
        env = {**self.env, "ADKWEB_EAGER_RUN": "1", **extra}
        service = processes.Service([DAPHNE, "-p", str(port), "adkweb.asgi:application"], env, ready="Listening on")
        self.started.append(service.start())
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}/api/adk", headers={"Authorization": f"Token {self.token}"}, timeout=60
        )
        return service, client


@pytest.fixture
def stack(tmp_path, settings, monkeypatch, demo):
    with processes.crashy_services(tmp_path, settings, monkeypatch, SLOW, LOG_LEVEL="INFO") as (env, server, started):
        _, token = token_create(user=demo["requester"], name="eager")
        yield Stack(env, server, token, started)


def _session() -> AdkSession:
    return services.session_create(app_name=crashy.APP_NAME, user_id="requester")


def _run(client: httpx.Client, session: AdkSession, text: str, **headers: str) -> httpx.Response:
    body = {
        "appName": crashy.APP_NAME,
        "userId": "requester",
        "sessionId": session.session_id,
        "newMessage": {"role": "user", "parts": [{"text": text}]},
    }
    return client.post("/run", json=body, headers=headers)


def _in_thread(call: Any) -> dict[str, Any]:
    """Run `call` in a thread; the dict gets its "answer" (or "error") and "thread"."""
    out: dict[str, Any] = {}

    def go() -> None:
        try:
            out["answer"] = call()
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            out["error"] = exc

    out["thread"] = threading.Thread(target=go, daemon=True)
    out["thread"].start()
    return out


def _turn(session: AdkSession, n: int = 0) -> Turn | None:
    return Turn.objects.filter(session=session).order_by("id")[n : n + 1].first()


def _status(session: AdkSession, n: int = 0) -> str:
    turn = _turn(session, n)
    return turn.status if turn else ""


def _shape(events: list[dict]) -> list[tuple]:
    """What two runs of the same script must share: who said what kind of thing, and the keys."""
    shape = []
    for e in events:
        parts = (e.get("content") or {}).get("parts") or []
        kinds = tuple(sorted(k for p in parts for k in p if k != "thoughtSignature"))
        texts = tuple(p["text"] for p in parts if "text" in p)
        calls = tuple((p["functionCall"]["name"], p["functionCall"]["id"]) for p in parts if "functionCall" in p)
        shape.append((e["author"], kinds, texts, calls, bool(e.get("longRunningToolIds")), tuple(sorted(e))))
    return shape


def _done_statements(session: AdkSession, turns: int) -> None:
    """/run answers ahead of its turn's DONE statement (the drain's `turn.finished` marked ahead): wait,
    briefly, for the session's turns to be marked done before reading their rows."""
    wait_for(
        lambda: list(Turn.objects.filter(session=session).values_list("status", flat=True)) == ["done"] * turns,
        timeout=10,
        what=f"{turns} turn(s) marked done",
    )


def _once(session: AdkSession, tool: str, label: str, text: str) -> None:
    assert [e[:2] for e in crashy.executions() if e[1] == label] == [(tool, label)], crashy.executions()
    assert [t for a, t in dialogue(session) if a == "user"] == [text]  # the message stored once
    ids = list(StoredEvent.objects.filter(session=session).values_list("event_id", flat=True))
    assert len(ids) == len(set(ids))


def test_run_answers_from_the_web_process_with_no_worker_as_the_worker_path_does(demo, stack):
    web, client = stack.web()
    work, signoff = _session(), _session()
    answer = _run(client, work, "work eager1")
    assert answer.status_code == 200, answer.text
    asked = _run(client, signoff, "signoff eager2")
    assert asked.status_code == 200, asked.text
    # No worker runs anywhere: the web process ran both turns, and woke nobody.
    assert stack.redis.llen(KEY) == 0
    for session in (work, signoff):
        _done_statements(session, 1)
        turn = _turn(session)
        assert turn is not None and (turn.status, turn.attempts) == ("done", 1)
    _once(work, "side_effect", "eager1", "work eager1")
    _once(signoff, "request_signoff", "eager2", "signoff eager2")
    assert PendingCall.objects.filter(session=signoff).count() == 1
    assert "runs the turn" not in web.text()  # never fell back
    # A retry with the same Idempotency-Key follows the first turn: no second turn, same answer.
    retried = _run(client, work, "work eager1", **{"Idempotency-Key": "k1"})
    again = _run(client, work, "work eager1", **{"Idempotency-Key": "k1"})
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert again.json() == retried.json()
    assert Turn.objects.filter(session=work).count() == 2

    # The worker path (eager off, a worker) answers the same events and opens one ticket.
    stack.start("worker")
    _, plain = stack.web(ADKWEB_EAGER_RUN="0")
    work2, signoff2 = _session(), _session()
    answer2 = _run(plain, work2, "work eager1b")
    asked2 = _run(plain, signoff2, "signoff eager2b")
    assert len(answer.json()) >= 3 and len(asked.json()) >= 2, (answer.json(), asked.json())
    assert _norm(answer.json(), "eager1") == _norm(answer2.json(), "eager1b")
    assert _norm(asked.json(), "eager2") == _norm(asked2.json(), "eager2b")
    assert PendingCall.objects.filter(session=signoff2).count() == 1


def _norm(events: list[dict], label: str) -> list[tuple]:
    return [tuple(str(x).replace(label, "L") for x in row) for row in _shape(events)]


def test_a_web_process_killed_mid_eager_turn_loses_nothing_and_a_worker_finishes_it_once(demo, stack, tmp_path):
    """SIGKILL the web process while its drain threads are blocked inside two turns: one after its
    tool's side effect and response are stored, one after its long-running tool opened a ticket.
    Nothing woke a worker; once the web's leases run out, beat's sweeper has a new worker resume
    both: each tool ran once, each user message is stored once, one ticket."""
    web, client = stack.web(ADKWEB_TEST_GATE_MODE="block")
    texts = {"resp": "work resp gate=after_response", "ticket": "signoff ticket gate=after_ticket"}
    sessions = {label: _session() for label in texts}
    calls = [_in_thread(lambda s=sessions[k], t=t: _run(client, s, t)) for k, t in texts.items()]
    reached = [tmp_path / "reached-resp-after_response", tmp_path / "reached-ticket-after_ticket"]
    wait_for(lambda: all(p.exists() for p in reached), timeout=60, what="both gates in the web process")
    assert stack.redis.llen(KEY) == 0  # no worker was woken: the web process runs them
    web.kill()
    killed_at = time.time()
    for call in calls:
        call["thread"].join(10)
        assert "error" in call, call  # the connection died with the process
    stack.start("worker")
    stack.start("beat")
    wait_for(
        lambda: all(_status(s) == "done" for s in sessions.values()),
        timeout=100,
        what="the sweeper to have a worker finish the web's turns",
    )
    print(f"the turns finished {time.time() - killed_at:.1f} s after the kill")
    for label, session in sessions.items():
        turn = _turn(session)
        assert turn is not None and turn.attempts == 2, (label, turn.attempts if turn else None)
    _once(sessions["resp"], "side_effect", "resp", texts["resp"])
    _once(sessions["ticket"], "request_signoff", "ticket", texts["ticket"])
    assert PendingCall.objects.filter(session=sessions["ticket"]).count() == 1
    assert PendingCall.objects.filter(session=sessions["resp"]).count() == 0


@pytest.mark.parametrize("why", ["slots full", "eager off"])
def test_a_turn_the_web_cannot_take_goes_to_a_worker(demo, stack, why):
    """No free slot (one, taken by a slow turn), or eager off: the wake-up goes out as before and
    waits for a worker; a worker started later runs the turn and the request answers."""
    extra = {"ADKWEB_EAGER_SLOTS": "1"} if why == "slots full" else {"ADKWEB_EAGER_RUN": "0"}
    web, client = stack.web(**extra)
    if why == "slots full":
        busy = _session()
        first = _in_thread(lambda: _run(client, busy, "slow busy"))
        wait_for(lambda: _status(busy) == "running", timeout=30, what="the slow turn to run in the web")
    waiting = _session()
    second = _in_thread(lambda: _run(client, waiting, "work later"))
    wait_for(lambda: stack.redis.llen(KEY) == 1, timeout=20, what="a wake-up for a worker")
    assert stack.redis.lrange(KEY, 0, -1) == [str(waiting.pk).encode()]
    assert _status(waiting) == "queued"
    stack.start("worker")
    second["thread"].join(60)
    texts = [p.get("text") for e in second["answer"].json() for p in (e.get("content") or {}).get("parts", [])]
    assert "done later" in texts, second
    _once(waiting, "side_effect", "later", "work later")
    if why == "slots full":
        first["thread"].join(60)
        assert first["answer"].status_code == 200
        _once(busy, "slow_tool", "busy", "slow busy")
        assert stack.redis.llen(KEY) == 0


def _invocations(session: AdkSession) -> dict[str, str]:
    """Each turn's invocation id, by its message's text."""
    turns = Turn.objects.filter(session=session)
    return {t.content["parts"][0]["text"]: t.invocation_id for t in turns}


def test_a_session_whose_lease_a_worker_holds_is_left_to_it_and_run_once(demo, stack):
    """A worker is running a slow turn of the session: the web's drain finds the lease taken and
    claims nothing; the worker runs the `/run`'s turn after its own (or a worker woken for what was
    left queued does), once; the request answers with its own turn's events. (The scripted model
    follows a session's first message: the second turn only replies.)"""
    stack.start("worker")
    web, client = stack.web()
    session = _session()
    services.message_send(session=session, text="slow held", actor=demo["requester"], streaming=False)
    wait_for(lambda: _status(session) == "running", timeout=30, what="the worker to run the slow turn")
    answer = _run(client, session, "work next")
    assert answer.status_code == 200, answer.text
    _done_statements(session, 2)
    assert [(t.status, t.attempts) for t in Turn.objects.filter(session=session).order_by("id")] == [
        ("done", 1),
        ("done", 1),
    ]
    mine = _invocations(session)["work next"]
    assert mine and {e["invocationId"] for e in answer.json()} == {mine}
    assert [e[:2] for e in crashy.executions()] == [("slow_tool", "held")]
    assert [t for a, t in dialogue(session) if a == "user"] == ["slow held", "work next"]
    assert "lease held elsewhere" in web.text()


def test_concurrent_runs_on_one_session_each_get_their_own_turn_once(demo, stack):
    """Four `/run`s at once on one session (two eager slots, a worker for the rest): each answers
    with its own turn's events; every turn ran once, the tool once (the scripted model calls it in
    the session's first turn)."""
    stack.start("worker")
    _, client = stack.web(ADKWEB_EAGER_SLOTS="2")
    session = _session()
    calls = [_in_thread(lambda i=i: _run(client, session, f"work race{i}")) for i in range(4)]
    for call in calls:
        call["thread"].join(90)
    _done_statements(session, 4)
    assert [(t.status, t.attempts) for t in Turn.objects.filter(session=session)] == [("done", 1)] * 4
    invocations = _invocations(session)
    for i, call in enumerate(calls):
        assert "answer" in call and call["answer"].status_code == 200, call
        events = call["answer"].json()
        assert events and {e["invocationId"] for e in events} == {invocations[f"work race{i}"]}
    assert len(crashy.executions()) == 1
    assert sorted(t for a, t in dialogue(session) if a == "user") == [f"work race{i}" for i in range(4)]
    ids = list(StoredEvent.objects.filter(session=session).values_list("event_id", flat=True))
    assert len(ids) == len(set(ids))


def test_a_web_process_stopped_mid_eager_turn_finishes_it_before_exiting(demo, stack):
    """SIGTERM (a deploy) while the web process runs a turn: it takes no new drains, finishes the
    running turn (no worker anywhere), then exits; the turn is done once, not cut short for the
    sweeper to resume."""
    web, client = stack.web()
    session = _session()
    call = _in_thread(lambda: _run(client, session, "slow term"))
    wait_for(lambda: _status(session) == "running", timeout=30, what="the slow turn to run in the web")
    assert web.proc is not None
    web.proc.terminate()
    web.proc.wait(timeout=SLOW + 20)
    call["thread"].join(10)
    turn = _turn(session)
    assert turn is not None and (turn.status, turn.attempts) == ("done", 1), web.text()[-3000:]
    _once(session, "slow_tool", "term", "slow term")
    assert "eager drain(s) running" not in web.text()


def test_a_drain_that_leaves_turns_queued_wakes_a_worker_for_them(demo, settings, monkeypatch):
    """Whatever the web's drain leaves queued (it found the lease taken and the holder stopped
    without looking, or it failed) gets the wake-up it would have had without eager runs; a drain
    that ran everything sends none."""
    from agents_app import eager

    settings.ADKWEB_CODE_AGENTS = {**settings.ADKWEB_CODE_AGENTS, crashy.APP_NAME: crashy.DOTTED}
    session = _session()
    woken: list[int] = []
    monkeypatch.setattr("agents_app.enqueue.session_enqueue", lambda *, session_pk: True)  # the turn stays queued
    services.message_send(session=session, text="work left", actor=demo["requester"], streaming=False)
    monkeypatch.setattr(eager, "_session_drain", lambda session_pk: 0)  # the lease was held elsewhere
    eager._drain(session.pk, woken.append)
    assert woken == [session.pk]
    for turn in Turn.objects.filter(session=session):  # saved, so the session's stored status follows
        turn.status = "done"
        turn.save(update_fields=["status"])
    eager._drain(session.pk, woken.append)
    assert woken == [session.pk]


def test_a_slot_is_reserved_only_when_free_and_given_back_when_unused(settings):
    from agents_app import eager

    settings.ADKWEB_EAGER_RUN, settings.ADKWEB_EAGER_SLOTS = True, 1
    settings.ADKWEB_EMBEDDED_WORKER = False
    before = eager.busy()
    with eager.reserved(1) as held:
        assert held is not None and eager.busy() == before + 1
        with eager.reserved(2) as other:
            assert other is None  # the one slot is taken
        assert not eager.run_here(2, lambda pk: None)  # another session's enqueue wakes a worker
    assert eager.busy() == before  # unused: given back
    settings.ADKWEB_EAGER_RUN = False
    with eager.reserved(1) as held:
        assert held is None
