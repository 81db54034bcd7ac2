"""`/run` in services mode (a real `celery worker` on PostgreSQL + Redis) answers from the session
group's messages alone when they account for every revision of its turn: the worker's
`turn.finished` carries the session's revision after the turn's last event
(agents_app.turn_sql.done_next), and a follower that has given every event up to it has nothing to
read. A message lost on the way (the turn's last event: no later message shows the gap) makes it
read the database, and no event is lost."""

from __future__ import annotations

from typing import Any

import pytest

from agents_app.api import watch
from tests.agents_app.test_api_run_follow import count_reads, seed_loop, stored

pytest_plugins = ["tests.conftest_live"]
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _no_silence_reads(settings: Any) -> None:
    """Silence makes a follower read the database every ADKWEB_API_POLL_SECONDS (1 s): a worker cold
    or slowed by a loaded machine would read for that reason alone, and these tests count the reads
    that messages cause. The web server runs in this process, so the setting reaches its follower."""
    settings.ADKWEB_API_POLL_SECONDS = 60.0


def test_a_run_answers_from_the_messages_without_reading_the_database(demo, worker, adk_client, monkeypatch):
    """Every event and each turn's end came as messages: no read (it read once per silent second
    of a cold worker under load before the poll was raised here, and failed)."""
    reads = count_reads(monkeypatch)
    session_id, returned = seed_loop(adk_client(demo["approver"]), sse=False)
    assert returned == stored(session_id) and all(returned)
    assert reads == []


@pytest.mark.parametrize("sse", [False, True], ids=["run", "run_sse"])
def test_a_lost_last_event_is_read_at_the_turns_end(demo, worker, adk_client, monkeypatch, sse):
    """The last agent event's message is dropped as the follower receives it: only `turn.finished`'s
    revision shows that one is missing, and the follower reads it."""
    reads = count_reads(monkeypatch)
    held: dict[int, dict[str, Any]] = {}  # per follower: its turn's last agent event message seen
    original = watch.TurnWatch.next
    dropped: list[dict] = []

    async def next_dropping_last(self: watch.TurnWatch, timeout: float) -> dict | None:
        message = await original(self, timeout)
        if message is not None and message.get("type") == "session.event" and message.get("author") != "user":
            # Hold each agent event back until the next message: if that is the turn's end, drop it.
            previous, held[id(self)] = held.get(id(self)), message
            return previous if previous is not None else await next_dropping_last(self, timeout)
        if message is not None and message.get("type") == "turn.finished" and id(self) in held:
            dropped.append(held.pop(id(self)))
        elif message is not None and id(self) in held:  # another message: hand the held event out first
            self.queue.put_nowait(message)
            return held.pop(id(self))
        return message

    monkeypatch.setattr(watch.TurnWatch, "next", next_dropping_last)
    session_id, returned = seed_loop(adk_client(demo["approver"]), sse=sse)
    assert returned == stored(session_id) and all(returned)  # every event, once, in stored order
    assert len(dropped) == 2  # each run's last event
    assert reads == [1, 1]  # each run's end read, and it found the dropped event
