"""Follow one Turn from a web request: its stored events as the worker stores them, its streaming
chunks, and its end.

The database is the truth; the session group's messages carry enough of it that a follower need
not read it on every wake-up. Each `session.event` carries the session's revision after that event
(every stored event moves it by exactly one), the event's turn and author and, when small, the
stored event: the follower takes its turn's events from the messages as long as the revisions run
without a gap from the revision it started at. A gap (a message lost, or one without those
fields), a missing event body and every POLL seconds of silence make it read the truth instead:
the session's revision, then the turn's status, then its events after the last one it has.
Reading the revision first means every event up to it is in that read, and every later one still
comes as a message; reading the status before the events means that once it says finished, every
event of the run is in that same read. So the events come in stored order, and one turn's events
are never lost to a dropped message.

The turn's end (`turn.finished`) is a read too, unless the message itself proves there is nothing
left to read: a turn that ended DONE through the drain's statement says the session's revision
after its last event (agents_app.turn_sql.done_next reads it under the session row's lock, after
the turn's last commit), and a follower that has accounted for every revision up to exactly that
one, without a gap, has been given every event its turn stored. Anything else (no revision, a
failed turn, a follower behind or ahead) reads as before. The drain sends one such `turn.finished`
*ahead* of that statement (agents_app.events.anotify_turn_ended: the revision after the last event
the turn stored, as the worker knows it), so a follower it completes answers without waiting for
the statement; one it does not complete reads, as on any end, and when the turn still reads running
there, the DONE's own `turn.finished` follows and ends it.
Streaming chunks are never stored, so they come from the layer only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db.models import QuerySet

from adkweb import compiled

from .. import selectors
from ..events import session_group
from ..models import StoredEvent, Turn
from .render import event_json, stored_event_json


def run_timeout() -> float:
    return float(getattr(settings, "ADKWEB_API_RUN_TIMEOUT", 120))


def poll_interval() -> float:
    return float(getattr(settings, "ADKWEB_API_POLL_SECONDS", 1.0))


@dataclass
class Step:
    kind: str  # "event" | "error" | "timeout"
    data: Any


STOP = "adkweb.watch.stop"
_stopping: set[asyncio.Future] = set()  # TurnWatch.stop_soon's, held until they end


class TurnWatch:
    """Membership of a session's group, joined before the turn is queued so nothing is missed."""

    def __init__(self, session_pk: int) -> None:
        self.group = session_group(session_pk)
        self.layer = get_channel_layer()
        self.queue: asyncio.Queue[dict] = asyncio.Queue()
        self.task: asyncio.Task | None = None
        self.channel = ""

    async def start(self) -> TurnWatch:
        if self.layer is not None:
            self.channel = await self.layer.new_channel()
            await self.layer.group_add(self.group, self.channel)
            # Bounded life: if the response is never iterated (client gone), the pump still ends.
            self.task = asyncio.create_task(self._pump(self.channel, run_timeout() + 30))
        return self

    async def _pump(self, channel: str, lifetime: float) -> None:
        try:
            async with asyncio.timeout(lifetime):
                while (message := await self.layer.receive(channel)).get("type") != STOP:
                    await self.queue.put(message)
        except TimeoutError:
            pass
        finally:
            await self.layer.group_discard(self.group, channel)

    async def stop(self) -> None:
        """End the pump by a message on its own channel, not by cancelling it: a cancelled
        channels_redis receive was seen to linger in Redis for minutes."""
        if self.task is None or self.task.done():
            return
        await self.layer.send(self.channel, {"type": STOP})
        done, _ = await asyncio.wait({self.task}, timeout=2.0)
        if not done:  # the layer is wedged: fall back to cancelling, without waiting on it
            self.task.cancel()
            self.task.add_done_callback(lambda task: task.cancelled() or task.exception())

    def stop_soon(self) -> None:
        """`stop()`, not waited for: an answer need not wait for the group's leave (the STOP message,
        the pump's end and its discard: Redis round trips after the turn's end)."""
        if self.task is None or self.task.done():
            return
        stopping = asyncio.ensure_future(self.stop())
        _stopping.add(stopping)
        stopping.add_done_callback(_stopping.discard)

    async def next(self, timeout: float) -> dict | None:
        """The next message, or None after `timeout` seconds. `asyncio.timeout`, not `wait_for`:
        Python 3.11's `wait_for` returns the message when a cancel (the client gone) lands in the
        same loop step as the message, and the response would go on following a turn nobody reads.
        A cancelled `Queue.get` loses nothing (the message stays queued)."""
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                return await self.queue.get()
        except TimeoutError:
            return None


@dataclass
class Progress:
    revision: int  # the session's, read first (-1: the session is gone)
    status: str
    error: str
    rows: list[tuple[int, str, dict]]  # (pk, event id, ADK REST JSON), stored order


def _turn_row(turn_id: int) -> QuerySet:
    return Turn.objects.filter(pk=turn_id).order_by().values_list("session__revision", "status", "error")[:1]


def _turn_events(turn_id: int, after_pk: int) -> QuerySet:
    # selectors.turn_events, as values: the events a turn's run stored (not the user's), stored order
    events = StoredEvent.objects.filter(turn_id=turn_id, pk__gt=after_pk).exclude(author="user")
    return events.order_by("id").values_list("pk", "event_id", "data")


def _progress(turn_id: int, after_pk: int) -> Progress:
    # The session's revision and the turn's status in one statement, before the events: see the
    # module docstring. A turn that is gone went with its session. Both statements are compiled
    # once per process (every /run ends with this read).
    found = compiled.rows("watch_turn_row", (), _turn_row, turn_id)
    revision, status, error = found[0] if found else (-1, *selectors.turn_state(turn_id=turn_id))
    events = compiled.rows("watch_turn_events", (), _turn_events, turn_id, after_pk)
    return Progress(revision, status, error, [(pk, event_id, event_json(data)) for pk, event_id, data in events])


class _Follower:
    """Where a follower is: the last event it gave, the revision it has accounted for."""

    def __init__(self, turn_id: int, revision: int | None) -> None:
        self.turn_id = turn_id
        self.revision = revision  # None: unknown, read first
        self.last_pk = 0
        self.stored_ids: set[str] = set()

    def take(self, message: dict) -> tuple[str, dict | None]:
        """A `session.event` message: ("skip", None) when it says nothing new for us, ("event",
        REST JSON) for our turn's next event, ("read", None) when the database must be asked."""
        revision = message.get("revision")
        if self.revision is None or not isinstance(revision, int):
            return "read", None
        if revision <= self.revision:  # accounted for (by a read, or from before this turn)
            return "skip", None
        if revision != self.revision + 1:  # a message was lost (or overtaken): read the truth
            return "read", None
        pk = message.get("event_pk")
        if message.get("turn_id") != self.turn_id or message.get("author") == "user":
            self.revision = revision
            return "skip", None
        if not isinstance(pk, int) or ("data_json" not in message and "data" not in message):
            return "read", None
        self.revision = revision
        if pk <= self.last_pk:  # already given by a read
            return "skip", None
        self.last_pk = pk
        # The stored JSON text; `data` (parsed) from a worker that sent it so (before data_json)
        rest = stored_event_json(message["data_json"]) if "data_json" in message else event_json(message["data"])
        self.stored_ids.add(str(rest.get("id", "")))
        return "event", rest

    def complete(self, message: dict) -> bool:
        """A `turn.finished` of this turn that leaves nothing to read: DONE, at the revision this
        follower has accounted for (see the module's docstring)."""
        revision = message.get("revision")
        return message.get("status") == "done" and isinstance(revision, int) and revision == self.revision

    def read(self, progress: Progress) -> list[dict]:
        events = []
        for pk, event_id, data in progress.rows:
            if pk > self.last_pk:
                self.last_pk = pk
                self.stored_ids.add(event_id)
                events.append(data)
        if progress.revision >= 0:
            self.revision = max(self.revision or 0, progress.revision)
        return events


async def follow(watch: TurnWatch, turn_id: int, *, partials: bool, revision: int | None = None) -> AsyncIterator[Step]:
    """Steps of one turn until it finishes (or fails, or the API's wait runs out). `revision`: the
    session's, read after `watch` joined the group and before the turn could store anything (None
    when unknown, e.g. a replayed request's turn: then the database is read first)."""
    deadline = time.monotonic() + run_timeout()
    here = _Follower(turn_id, revision)
    message: dict | None = None if revision is None else {"type": "start"}
    while True:
        read = message is None  # silence (or the start without a revision): read the truth
        if message is not None:
            kind = message.get("type")
            if kind == "session.partial":
                if partials and message.get("turn_id") == turn_id and message.get("event_id") not in here.stored_ids:
                    yield Step("event", message["event"])
            elif kind == "session.event":
                what, data = here.take(message)
                if what == "event":
                    yield Step("event", data)
                read = what == "read"
            elif kind == "turn.finished" and message.get("turn_id") == turn_id:
                if here.complete(message):  # every event of the turn given: nothing to read
                    return
                read = True
        if read:
            progress = await sync_to_async(_progress)(turn_id, here.last_pk)
            for data in here.read(progress):
                yield Step("event", data)
            if progress.status == Turn.Status.FAILED:
                yield Step("error", progress.error or "The agent run failed.")
                return
            if progress.status == Turn.Status.DONE:
                return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            yield Step(
                "timeout",
                f"The agent run did not finish within {run_timeout():g} s. It goes on in the "
                f"background (turn {turn_id}); read the session for its events.",
            )
            return
        message = await watch.next(min(poll_interval(), remaining))
