"""The order of a turn's live publishes (agents_app.events sends them; this module orders them).

A turn's stored events are published while the turn goes on, by one task per turn
(`TurnPublisher`), so ADK's next step does not wait for the channel layer; whatever must come after
them (the turn's end, a publish sent synchronously from the session store's thread) waits for them
first (`publishes_sent`). The drain's "running" status at a claim is sent without waiting
(`publish_soon`), riding in the batch of the turn's first event (`_Lead`), and the turn's end waits
for it (`status_sent`). A publish never raises: it is logged.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from adkweb.live import abatched, apublished

logger = logging.getLogger(__name__)


class TurnPublisher:
    """A turn's publishes (its stored events, its streaming chunks), sent in order by one task on the
    loop while the turn goes on: ADK's next step no longer waits for the previous event's round trip
    to the channel layer (~0.4 ms quiet, more at load, for each of a turn's 4-5 events). What must
    come after them waits for `flush()` first: the turn's end (agents_app.turn_exec.turn_run flushes
    before it returns, so every end, the drain's `turn.finished` and status included, is published
    after), and the session store's thread path (a ticket hook's publishes are sent from there,
    synchronously: they would overtake what is queued here). A publish never raises (logged)."""

    def __init__(self) -> None:
        self._pending: deque[tuple[Callable[..., Awaitable[None]], dict[str, Any]]] = deque()
        self._task: asyncio.Future[None] | None = None
        self.lead: _Lead | None = None  # rides in the batch of the next publish (`_Lead`)
        # The session's revision after the last event the running turn stored (`stored`): None when
        # it stored none, or one whose revision is not known (then none is trusted until `turn_starts`).
        self.revision: int | None = None
        self._revision_known = True
        self.started_at = 0.0  # when the running turn started (monotonic): after its claim

    def turn_starts(self) -> None:
        """A turn of the drain starts (claimed): no event of it stored yet."""
        self.revision, self._revision_known = None, True
        self.started_at = time.monotonic()

    def stored(self, revision: int | None) -> None:
        """The running turn stored an event, the session's revision after it (None: not known)."""
        if revision is None:
            self._revision_known = False
        self.revision = revision if self._revision_known else None

    def put(self, publish: Callable[..., Awaitable[None]], kwargs: dict[str, Any]) -> None:
        self._pending.append((publish, kwargs))
        if self._task is None or self._task.done():  # the task ends only once nothing is pending
            self._task = asyncio.get_running_loop().create_task(self._send())

    async def _send(self) -> None:
        while self._pending:
            publish, kwargs = self._pending.popleft()
            lead, self.lead = self.lead, None
            if lead is not None and not lead.take():
                lead = None  # on its way alone already
            try:
                if lead is None:
                    await publish(**kwargs)
                else:
                    async with abatched():  # one round trip for both, the lead's messages first
                        await lead.publish_quietly()
                        await publish(**kwargs)
            except Exception:
                logger.warning("Could not publish %s for session %s.", publish.__name__, kwargs.get("session_pk"))
            finally:
                if lead is not None:
                    lead.done()

    def idle(self) -> bool:
        """Nothing queued and nothing on its way: a publish made now leaves after everything put so far."""
        return not self._pending and (self._task is None or self._task.done())

    async def flush(self) -> None:
        """Until everything put so far has been published (a cancelled caller leaves it going on)."""
        if self._task is not None and not self._task.done():
            await asyncio.shield(self._task)


# The publisher of the turn running in this context (agents_app.turn_exec.turn_run sets it).
turn_publisher: contextvars.ContextVar[TurnPublisher | None] = contextvars.ContextVar(
    "adkweb_turn_publisher", default=None
)


async def apublish_in_order(publish: Callable[..., Awaitable[None]], **kwargs: Any) -> None:
    """`await publish(**kwargs)`, or queued behind the running turn's earlier publishes (not awaited)."""
    publisher = turn_publisher.get()
    if publisher is None:
        await publish(**kwargs)
    else:
        publisher.put(publish, kwargs)


async def apublish_now_or_in_order(publish: Callable[..., Awaitable[None]], **kwargs: Any) -> None:
    """`await publish(**kwargs)` now where the running turn's publisher is idle (everything it was given has
    left), else queued behind it as `apublish_in_order`. For a drain's last publish (its last turn's end,
    agents_app.runner): queued on an idle publisher, it cost a task, the drain's wait for it through a
    shield and a loop pass or two more (bench/README.md, phase 25 (drain)), where the drain waits for it
    right after anyway (`publishes_sent`). The same order: nothing of the turn's is still to leave."""
    publisher = turn_publisher.get()
    if publisher is None or publisher.idle():
        await publish(**kwargs)
    else:
        publisher.put(publish, kwargs)


def turn_stored(revision: int | None) -> None:
    """The running turn (if a drain's publisher runs it) stored an event; the revision after it."""
    publisher = turn_publisher.get()
    if publisher is not None:
        publisher.stored(revision)


async def publishes_sent() -> None:
    """Wait until the running turn's queued publishes have left and the channel layer has answered
    what this loop sent without waiting (before a synchronous publisher: its sends leave by another
    connection, and Redis orders only one connection's commands)."""
    publisher = turn_publisher.get()
    if publisher is not None:
        await publisher.flush()
    await apublished()


# The drain's "running" status on its way (anotify_session_status_soon) while its turn starts.
_status_on_its_way: contextvars.ContextVar[_Lead | None] = contextvars.ContextVar(
    "adkweb_status_on_its_way", default=None
)
LEAD_WAIT = 0.05  # seconds a lead waits for a publish to ride with (a turn's first event: a few ms), then leaves alone


class _Lead:
    """A publish that leaves in the batch of its turn publisher's next one (one round trip where it
    made two of its own), alone once LEAD_WAIT passes without one, or when `sent()` is awaited first."""

    def __init__(self, publish: Callable[..., Awaitable[None]], kwargs: dict[str, Any]) -> None:
        self.publish, self.kwargs, self.taken = publish, kwargs, False
        self.sent: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._timer = asyncio.get_running_loop().call_later(LEAD_WAIT, self._alone)

    def take(self) -> bool:
        """Whether the caller sends it now (it was not sent yet)."""
        if self.taken:
            return False
        self.taken = True
        self._timer.cancel()
        return True

    async def publish_quietly(self) -> None:
        try:
            await self.publish(**self.kwargs)
        except Exception:
            logger.warning("The turn's running status was not published.", exc_info=True)

    def done(self) -> None:
        if not self.sent.done():
            self.sent.set_result(None)

    async def _send_alone(self) -> None:
        try:
            await self.publish_quietly()
        finally:
            self.done()

    def _alone(self) -> None:
        if self.take():
            asyncio.ensure_future(self._send_alone())

    async def wait_sent(self) -> None:
        if self.take():
            await self._send_alone()
        else:
            await asyncio.shield(self.sent)


def publish_soon(publish: Callable[..., Awaitable[None]], kwargs: dict[str, Any]) -> None:
    """`publish(**kwargs)` without waiting for it (events.anotify_session_status_soon: the drain's
    "running" at a claim, while the turn starts). What must hold is its order before the turn's end,
    so whatever publishes that end first awaits `status_sent()` (agents_app.turn_exec, runner). With
    the drain's publisher, it rides in the batch of the turn's first event: one round trip for both
    (`_Lead`)."""
    publisher = turn_publisher.get()
    lead = _Lead(publish, kwargs)
    if publisher is not None:
        publisher.lead = lead
    else:
        lead.take()
        asyncio.ensure_future(lead._send_alone())
    _status_on_its_way.set(lead)


async def status_sent() -> None:
    """Wait for the status `publish_soon` sent in this context, if any, sent alone now
    if nothing took it yet (it never raises: a failed publish is logged, as every publish)."""
    pending = _status_on_its_way.get()
    if pending is None:
        return
    _status_on_its_way.set(None)
    await pending.wait_sent()
