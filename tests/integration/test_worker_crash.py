"""SIGKILL a real `celery worker` at each point of a turn; a new worker (found by `celery beat`'s
sweeper once the dead worker's lease has run out) resumes every turn within 60 s with default
settings, each tool runs once, and no event is stored twice. The worker runs the threads pool (as
production): the six turns are in flight in one process when it is killed, and die together.

Every conversation runs the scripted agent (tests/engine_scenarios/crashy.py), which writes a
file when it reaches its gate and then blocks, so the kill lands exactly there; tools count
their executions in a file, outside the killed process.
"""

from __future__ import annotations

import time

import pytest

from agents_app import services
from agents_app.models import StoredEvent, Turn
from approvals import services as approvals
from approvals.models import PendingCall
from tests.conftest import wait_for
from tests.engine_scenarios import agent_texts, calls, crashy, dialogue, responses

from . import processes

pytestmark = pytest.mark.django_db(transaction=True)

POINTS = {  # label -> (message, what the conversation ends with)
    "call": ("work call gate=after_call", ["done call"]),
    "resp": ("work resp gate=after_response", ["done resp"]),
    "ticket": ("signoff ticket gate=after_ticket", ["waiting ticket"]),
    "model": ("work model gate=in_model", ["done model"]),
    "error": ("boom error gate=after_error", []),
    "reply": ("work reply gate=after_reply", ["done reply"]),
}
TOOLS = {"call": "side_effect", "resp": "side_effect", "ticket": "request_signoff", "model": "side_effect"}
TOOLS |= {"error": "broken_tool", "reply": "side_effect"}


@pytest.fixture
def stack(tmp_path, settings, monkeypatch, demo):
    """Own Redis, a worker in gate-blocking mode and beat, all with default engine settings."""
    settings.ADKWEB_CODE_AGENTS = {**settings.ADKWEB_CODE_AGENTS, crashy.APP_NAME: crashy.DOTTED}
    monkeypatch.setenv("ADKWEB_TEST_GATE_DIR", str(tmp_path))
    redis = processes.RedisServer().start()
    env = processes.service_env(
        redis.url,
        ADKWEB_CODE_AGENTS=f"{crashy.APP_NAME}={crashy.DOTTED}",
        ADKWEB_TEST_GATE_DIR=str(tmp_path),
        ADKWEB_TEST_GATE_MODE="block",
    )
    producer = processes.producer(redis.url)
    monkeypatch.setattr(
        "agents_app.enqueue.session_enqueue", lambda *, session_pk: processes.send_drain(producer, session_pk)
    )
    started: list[processes.Service] = []

    def start(kind: str) -> processes.Service:
        started.append(getattr(processes, kind)(env).start())
        return started[-1]

    yield start
    for service in started:
        service.kill()
        service.stop()
    redis.stop()


def test_killed_worker_turns_resume_within_60s_and_repeat_nothing(demo, stack, tmp_path):
    first = stack("worker")
    stack("beat")
    sessions = {}
    for label, (text, _) in POINTS.items():
        sessions[label] = services.session_create(app_name=crashy.APP_NAME, user_id="requester")
        services.message_send(session=sessions[label], text=text, actor=demo["requester"], streaming=False)
    reached = [tmp_path / f"reached-{label}-{POINTS[label][0].split('gate=')[1]}" for label in POINTS]
    wait_for(lambda: all(p.exists() for p in reached), timeout=60, what=f"every gate: {reached}")

    first.kill()
    killed_at = time.time()
    stack("worker")
    wait_for(
        lambda: not Turn.objects.filter(status__in=["queued", "running"]).exists(),
        timeout=90,
        what="every turn to finish after the kill",
    )
    slowest = max(Turn.objects.values_list("finished_at", flat=True)).timestamp() - killed_at
    print(f"the last turn finished {slowest:.1f} s after the kill")
    assert slowest < 60, f"the last turn finished {slowest:.1f} s after the kill"

    for label, (text, replies) in POINTS.items():
        session = sessions[label]
        turn = Turn.objects.get(session=session)
        expected = ("failed", "RuntimeError: broken error") if label == "error" else ("done", "")
        assert (turn.status, turn.error) == expected, label
        assert turn.attempts == 2, label
        assert [t for a, t in dialogue(session) if a == "user"] == [text], label  # the message stored once
        assert agent_texts(session) == replies, label
        assert [e[:2] for e in crashy.executions() if e[1] == label] == [(TOOLS[label], label)], label
        assert [c["id"] for c in calls(session)] == [f"call-{label}"], label
        assert len(responses(session)) == (0 if label == "error" else 1), label
        ids = list(StoredEvent.objects.filter(session=session).values_list("event_id", flat=True))
        assert len(ids) == len(set(ids)), label

    # The ticket opened before the kill is answered once, and the agent resumes once.
    ticket = PendingCall.objects.get(session=sessions["ticket"])
    approvals.ticket_approve(ticket=ticket, actor=demo["approver"])
    wait_for(lambda: agent_texts(sessions["ticket"])[-1:] == ["signed ticket"], timeout=30, what="the sign-off")
    assert [e[:2] for e in crashy.executions() if e[1] == "ticket"] == [("request_signoff", "ticket")]


# Killed in the turn an approval queued: after its answer is stored (before the agent ran on it), and in
# the confirmed tool (its side effect done, its result not stored). label -> (message, the gate, the tool
# the approval runs (None: the answer is the tool's), how often: a tool killed in its side effect runs
# again under the same idempotency key, ADK's resumability promising at least once).
APPROVED = {
    "signed": ("signoff signed gate=after_answer", "after_answer", None, 0),
    "confirmed": ("confirm confirmed gate=after_answer", "after_answer", "guarded_tool", 1),
    "paid": ("confirm paid gate=in_tool", "in_tool", "guarded_tool", 2),
}


def test_a_worker_killed_in_the_turn_an_approval_queued_resumes_it_once(demo, stack, tmp_path):
    first = stack("worker")
    stack("beat")
    sessions = {}
    for label, (text, *_) in APPROVED.items():
        sessions[label] = services.session_create(app_name=crashy.APP_NAME, user_id="requester")
        services.message_send(session=sessions[label], text=text, actor=demo["requester"], streaming=False)
    wait_for(
        lambda: Turn.objects.filter(status="done").count() == len(APPROVED) == PendingCall.objects.count(),
        timeout=60,
        what="a ticket in each conversation",
    )
    for label in APPROVED:
        approvals.ticket_approve(ticket=PendingCall.objects.get(session=sessions[label]), actor=demo["approver"])
    reached = [tmp_path / f"reached-{label}-{gate}" for label, (_, gate, *_) in APPROVED.items()]
    wait_for(lambda: all(p.exists() for p in reached), timeout=60, what=f"every gate: {reached}")

    first.kill()
    stack("worker")
    wait_for(
        lambda: not Turn.objects.filter(status__in=["queued", "running"]).exists(),
        timeout=90,
        what="every turn to finish after the kill",
    )
    for label, (_, _, tool, runs) in APPROVED.items():
        session = sessions[label]
        turns = list(Turn.objects.filter(session=session).order_by("id").values_list("status", "attempts", "error"))
        assert turns == [("done", 1, ""), ("done", 2, "")], label
        (ticket,) = PendingCall.objects.filter(session=session)  # no second question for the same call
        assert (ticket.status, ticket.responses.count()) == ("approved", 1), label
        answers = [r for author, r in responses(session) if author == "user"]
        assert [a["id"] for a in answers] == [ticket.call_id], label  # the answer stored once
        replies = ["waiting signed", "signed signed"] if tool is None else [f"done {label}"]
        assert agent_texts(session) == replies, label
        ran = [e for e in crashy.executions() if e[1] == label and e[0] == tool]
        assert len(ran) == runs and len({e[2] for e in ran}) == min(runs, 1), label  # one key
        results = [r for _, r in responses(session, tool) if "status" in r["response"]] if tool else []
        assert [r["response"]["status"] for r in results] == (["done"] if tool else []), label
        ids = list(StoredEvent.objects.filter(session=session).values_list("event_id", flat=True))
        assert len(ids) == len(set(ids)), label


def test_a_worker_stopped_after_its_turns_exits_promptly(demo, stack):
    """SIGTERM (Celery's warm shutdown) after turns ran on several of its threads: the process exits
    within seconds, with its turns' loops closed; no loop or database thread holds it."""
    worker = stack("worker")
    sessions = [services.session_create(app_name=crashy.APP_NAME, user_id="requester") for _ in range(3)]
    for i, session in enumerate(sessions):
        services.message_send(session=session, text=f"work stop{i}", actor=demo["requester"], streaming=False)
    wait_for(lambda: Turn.objects.filter(status="done").count() == 3, timeout=60, what="three turns done")
    assert worker.proc is not None
    started = time.monotonic()
    worker.proc.terminate()
    code = worker.proc.wait(timeout=60)
    took = time.monotonic() - started
    print(f"the worker exited {took:.1f} s after SIGTERM")
    assert code == 0 and took < 15, worker.text()[-3000:]
    assert "Worker loops closed" in worker.text(), worker.text()[-3000:]
