"""`/run` and `/run_sse` follow their turn from the session group's messages (agents_app.api.watch):
the stored events travel in the messages, and the database is read at the turn's end, on a gap
in the session's revisions, and on silence. A lost message never loses an event nor reorders
them: each run returns exactly the events its turn stored, in stored order."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from django.conf import settings as django_settings

from adkweb.channel_layers import ThreadSafeInMemoryChannelLayer
from agents_app import selectors
from agents_app.api import watch
from agents_app.api.render import event_json
from agents_app.models import AdkSession, Turn
from tests.conftest import wait_for
from tests.live_server import function_response_message, long_running_call, text_message

pytest_plugins = ["tests.conftest_live"]

APP = "reimbursement_agent"

# Three tests here drop or hold what only embedded mode sends (the in-memory channel layer's
# group_send, SQLite's turn statements). With REDIS_URL set (services mode) none of that is on
# the path: tests/integration/test_api_run_follow_services.py follows the same runs over Redis.
embedded_only = pytest.mark.skipif(
    "InMemory" not in django_settings.CHANNEL_LAYERS["default"]["BACKEND"],
    reason="embedded mode's channel layer and SQLite statements; services mode: test_api_run_follow_services",
)


def stored(session_id: str) -> list[list[dict[str, Any]]]:
    """Per turn of the session, oldest first: the events its run stored, as ADK's REST JSON."""
    session = AdkSession.objects.get(session_id=session_id)
    turns = Turn.objects.filter(session=session).order_by("id")
    return [[event_json(e.data) for e in selectors.turn_events(turn_id=t.pk)] for t in turns]


def lose(monkeypatch: pytest.MonkeyPatch, which: Any) -> list[dict]:
    """Drop the API followers' group messages (`session-<pk>`) that `which(message, nth)` picks;
    nth counts the session.event messages of agent events per turn. Returns what was dropped."""
    original = ThreadSafeInMemoryChannelLayer.group_send
    counts: Counter[Any] = Counter()
    dropped: list[dict] = []

    async def group_send(self: Any, group: str, message: dict) -> None:
        if group.startswith("session-") and "." not in group:
            nth = 0
            if message.get("type") == "session.event" and message.get("author") != "user":
                counts[message.get("turn_id")] += 1
                nth = counts[message.get("turn_id")]
            if which(message, nth):
                dropped.append(message)
                return
        await original(self, group, message)

    monkeypatch.setattr(ThreadSafeInMemoryChannelLayer, "group_send", group_send)
    return dropped


def seed_loop(client: Any, *, sse: bool) -> tuple[str, list[list[dict[str, Any]]]]:
    """The seed's two runs (message → ticket, approval → reimburse); what each returned."""
    session = client.create_session(APP)

    def send(message: dict[str, Any]) -> list[dict[str, Any]]:
        if sse:
            return client.run_sse(APP, session["id"], message)
        r = client.run(APP, session["id"], message)
        assert r.status_code == 200, r.text
        return r.json()

    first = send(text_message("Please reimburse 200$ for meals"))
    call = long_running_call(first)
    second = send(function_response_message(call["id"], call["name"], {"status": "approved"}))
    return session["id"], [first, second]


LOSSES = {
    "a middle event": lambda m, nth: nth == 2,
    "the first event": lambda m, nth: nth == 1,
    "every event": lambda m, nth: m.get("type") == "session.event",
    "every event and the end": lambda m, nth: m.get("type") in {"session.event", "turn.finished"},
    "the events' bodies": lambda m, nth: m.pop("data", None) is not None and False,  # sent without `data`
}


@embedded_only
@pytest.mark.parametrize("sse", [False, True], ids=["run", "run_sse"])
@pytest.mark.parametrize("loss", list(LOSSES))
def test_a_lost_message_loses_no_event(demo, worker, adk_client, monkeypatch, settings, loss, sse):
    settings.ADKWEB_API_POLL_SECONDS = 0.2  # silence: the follower reads the database this often
    dropped = lose(monkeypatch, LOSSES[loss])
    session_id, returned = seed_loop(adk_client(demo["approver"]), sse=sse)
    truth = stored(session_id)
    assert [len(t) for t in truth] == [len(r) for r in returned] and all(truth)
    assert returned == truth  # every event, once, in stored order
    if loss != "the events' bodies":
        assert dropped


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The follower's database reads (how many events each found that the messages had not brought)."""
    reads: list[int] = []
    original = watch._progress

    def counted(turn_id: int, after_pk: int) -> watch.Progress:
        progress = original(turn_id, after_pk)
        reads.append(len(progress.rows))
        return progress

    monkeypatch.setattr(watch, "_progress", counted)
    return reads


def test_a_run_answers_from_the_messages_when_no_message_is_lost(demo, worker, adk_client, monkeypatch):
    """The events come from the messages, and so does the turn's end: on SQLite too the drain's
    `done_next` reads the session's revision after the turn's last event, `turn.finished` carries it,
    and a follower that accounted for every revision up to it has nothing to read (a lost message
    is read: test_a_lost_message_loses_no_event)."""
    reads = count_reads(monkeypatch)
    session_id, returned = seed_loop(adk_client(demo["approver"]), sse=False)
    assert returned == stored(session_id)
    assert reads == []  # no read: each run's end came with the revision of its last event


def test_follower_takes_only_contiguous_revisions():
    """A message whose revision does not follow the last one accounted for asks for a read."""
    here = watch._Follower(turn_id=7, revision=10)
    data = {"id": "e1", "invocation_id": "i", "author": "agent", "timestamp": 1.0}
    ours = {"type": "session.event", "turn_id": 7, "author": "agent", "data": data}
    assert here.take({**ours, "revision": 12, "event_pk": 3}) == ("read", None)  # 11 was lost
    assert here.take({**ours, "revision": 10, "event_pk": 1}) == ("skip", None)  # before this turn
    assert here.take({**ours, "revision": 11, "turn_id": 8, "event_pk": 2})[0] == "skip"  # another turn's
    what, event = here.take({**ours, "revision": 12, "event_pk": 3})
    assert what == "event" and event is not None and event["id"] == "e1"
    assert here.take({**ours, "revision": 13, "event_pk": 4})[0] == "event"
    body_missing = {k: v for k, v in ours.items() if k != "data"}
    assert here.take({**body_missing, "revision": 14, "event_pk": 5}) == ("read", None)
    assert here.take({"type": "session.event", "event_pk": 5}) == ("read", None)  # an old publisher's


def test_follower_takes_an_event_from_its_stored_json_text():
    """A turn's event comes as the JSON text stored (`data_json`, what workers send since phase 22):
    the follower parses it and gives it as ADK's REST JSON; `data` (parsed) is what older workers
    sent, and is taken too."""
    import json

    here = watch._Follower(turn_id=7, revision=10)
    data = {"id": "e1", "invocation_id": "i", "author": "agent", "timestamp": 1.0}
    ours = {"type": "session.event", "turn_id": 7, "author": "agent", "data_json": json.dumps(data)}
    what, event = here.take({**ours, "revision": 11, "event_pk": 3})
    assert what == "event" and event is not None and event["id"] == "e1" and event["invocationId"] == "i"
    assert here.stored_ids == {"e1"}
    assert here.take({**ours, "revision": 12, "event_pk": 3}) == ("skip", None)  # given already
    older = {"type": "session.event", "turn_id": 7, "author": "agent", "data": {**data, "id": "e2"}}
    assert here.take({**older, "revision": 13, "event_pk": 4})[1]["id"] == "e2"


async def test_a_cancel_that_lands_with_a_message_still_cancels_the_follower():
    """A client that goes away cancels the response's task; when the cancel lands in the same loop
    step as a group message, the follower must still stop (Python 3.11's `wait_for` returned the
    message and dropped the cancel), and the message stays queued rather than lost."""
    follower = watch.TurnWatch(session_pk=1)
    waiting = asyncio.ensure_future(follower.next(timeout=5))
    await asyncio.sleep(0)  # the follower now waits on its queue
    follower.queue.put_nowait({"type": "session.event", "revision": 1})
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert follower.queue.qsize() == 1


async def test_the_follower_returns_none_after_its_timeout_and_a_message_when_one_comes():
    follower = watch.TurnWatch(session_pk=1)
    assert await follower.next(timeout=0.01) is None
    follower.queue.put_nowait({"type": "turn.finished"})
    assert await follower.next(timeout=0.01) == {"type": "turn.finished"}


@embedded_only
def test_a_run_joins_its_sessions_group_in_the_hop_that_queues_its_turn(demo, worker, adk_client, monkeypatch):
    """One thread hop validates and queues the turn; the follower's join (started on the loop as soon
    as the session row is read) goes on meanwhile and is waited for once the turn's row is written,
    before its transaction commits: the follower is a member before any worker can claim the turn.
    Here each join takes 0.3 s: the turn is written while it is still on its way."""
    from django.db.backends.base.base import BaseDatabaseWrapper

    from agents_app import services
    from agents_app.api import run as run_module

    hops: list[str] = []
    written: list[bool] = []  # at each turn's insert: is the follower a member yet?
    committed: list[bool] = []  # at the commit after it
    original_hop, original_insert = run_module.sync_to_async, services.turn_insert_sqlite
    original_start, original_commit = watch.TurnWatch.start, BaseDatabaseWrapper.commit
    pks: list[int] = []

    def member(session_pk: int) -> bool:
        return bool(watch.get_channel_layer().groups.get(f"session-{session_pk}"))

    def counted(fn: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(fn, "__name__", repr(fn)))
        return original_hop(fn, *args, **kwargs)

    async def slow_start(self: watch.TurnWatch) -> watch.TurnWatch:
        await asyncio.sleep(0.3)
        return await original_start(self)

    def insert(**fields: Any) -> Any:
        written.append(member(fields["session"].pk))
        pks.append(fields["session"].pk)
        return original_insert(**fields)

    def commit(self: Any) -> None:
        if len(committed) < len(written):
            committed.append(member(pks[-1]))
        original_commit(self)

    monkeypatch.setattr(run_module, "sync_to_async", counted)
    monkeypatch.setattr(watch.TurnWatch, "start", slow_start)
    monkeypatch.setattr(services, "turn_insert_sqlite", insert)
    monkeypatch.setattr(BaseDatabaseWrapper, "commit", commit)
    session_id, returned = seed_loop(adk_client(demo["approver"]), sse=False)
    assert returned == stored(session_id) and all(returned)
    assert hops == ["prepare_and_queue", "prepare_and_queue"]  # one hop before each run's follow
    assert written == [False, False]  # the join still on its way as each turn was written ...
    assert committed == [True, True]  # ... and done before its transaction committed


def test_a_run_answers_before_its_follower_has_left_the_group(demo, worker, adk_client, monkeypatch):
    """The answer does not wait for the follower's leave (its STOP message, the pump's end, the
    discard): that goes on after the response. Here each leave waits for the test to have the answer."""
    import threading

    answered = threading.Event()
    order: list[str] = []
    original_stop = watch.TurnWatch.stop

    async def stop(self: watch.TurnWatch) -> None:
        await asyncio.to_thread(answered.wait, 10)  # only a wrong answer (red) waits this out
        order.append("left" if answered.is_set() else "left before the answer")
        await original_stop(self)

    monkeypatch.setattr(watch.TurnWatch, "stop", stop)
    client = adk_client(demo["approver"])
    session = client.create_session(APP)
    r = client.run(APP, session["id"], text_message("Please reimburse 200$ for meals"))
    assert r.status_code == 200 and long_running_call(r.json())
    answered.set()
    for _ in range(200):  # the leave, let go, ends
        if order:
            break
        threading.Event().wait(0.05)
    assert order == ["left"]


@embedded_only
def test_a_run_answers_before_its_turns_done_statement(demo, worker, adk_client, monkeypatch):
    """The worker sends the turn's end to API followers (`turn.finished` marked ahead, with the
    session's revision after the turn's last event) before its DONE statement (`done_next`), so /run
    answers without waiting for that statement. Here the statement waits for the test to have the
    answer; the answer holds every event the turn stored."""
    import threading

    from agents_app import turn_sqlite

    answered = threading.Event()
    order: list[str] = []
    original = turn_sqlite.done_next

    def done_next(**kwargs: Any) -> Any:
        answered.wait(5)  # only a wrong answer (red) waits this out
        order.append("done" if answered.is_set() else "done before the answer")
        return original(**kwargs)

    monkeypatch.setattr(turn_sqlite, "done_next", done_next)
    reads = count_reads(monkeypatch)
    client = adk_client(demo["approver"])
    session = client.create_session(APP)
    r = client.run(APP, session["id"], text_message("Please reimburse 200$ for meals"))
    answered.set()
    assert r.status_code == 200 and long_running_call(r.json())
    assert reads == []  # the early end completed the follower: nothing read (the turn still running)
    wait_for(lambda: order, timeout=10, what="the turn's DONE")
    assert order == ["done"]
    assert [r.json()] == stored(session["id"])  # every event of the turn, in stored order
