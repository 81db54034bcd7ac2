"""Follow one Turn from a web request: its stored events as the worker stores them, its streaming
chunks, and its end.

The channel layer is only a wake-up: every `session.event` / `turn.finished` (and, as a safety
net, every POLL seconds of silence) makes us read the turn's status and then its new stored
events from the database, which is the truth. Reading the status first means that once it says
finished, every event of the run is already committed and in that same read. Streaming chunks
are never stored, so they come from the layer only.
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

from .. import selectors
from ..events import session_group
from ..models import Turn
from .render import event_json


def run_timeout() -> float:
    return float(getattr(settings, "ADKWEB_API_RUN_TIMEOUT", 120))


def poll_interval() -> float:
    return float(getattr(settings, "ADKWEB_API_POLL_SECONDS", 1.0))


@dataclass
class Step:
    kind: str  # "event" | "error" | "timeout"
    data: Any


STOP = "adkweb.watch.stop"


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

    async def next(self, timeout: float) -> dict | None:
        try:
            return await asyncio.wait_for(self.queue.get(), timeout=max(timeout, 0.0))
        except TimeoutError:
            return None


def _progress(turn_id: int, after_pk: int) -> tuple[str, str, list[tuple[int, str, dict]]]:
    status, error = selectors.turn_state(turn_id=turn_id)  # first: see the module docstring
    rows = selectors.turn_events(turn_id=turn_id, after_pk=after_pk)
    return status, error, [(row.pk, row.event_id, event_json(row.data)) for row in rows]


async def follow(watch: TurnWatch, turn_id: int, *, partials: bool) -> AsyncIterator[Step]:
    """Steps of one turn until it finishes (or fails, or the API's wait runs out)."""
    deadline = time.monotonic() + run_timeout()
    last_pk, stored_ids = 0, set()
    message: dict | None = {"type": "start"}
    while True:
        if message is not None and message.get("type") == "session.partial":
            if partials and message.get("turn_id") == turn_id and message.get("event_id") not in stored_ids:
                yield Step("event", message["event"])
        else:  # a stored event, a turn's end, or silence: read the truth
            status, error, rows = await sync_to_async(_progress)(turn_id, last_pk)
            for pk, event_id, data in rows:
                last_pk = pk
                stored_ids.add(event_id)
                yield Step("event", data)
            if status == Turn.Status.FAILED:
                yield Step("error", error or "The agent run failed.")
                return
            if status == Turn.Status.DONE:
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
