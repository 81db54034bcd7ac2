"""The in-memory channel layer of embedded mode: safe to send to from other threads.

Embedded mode runs the Celery worker as threads of the serving process, each with its own event
loop. Channels' InMemoryChannelLayer puts into an asyncio.Queue from whatever loop sends, which
does not wake a consumer waiting on the server's loop. This layer hands the put to the loop the
receiver waits on.
"""

from __future__ import annotations

import asyncio
import time

from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer

from .direct import DirectDelivery, receivers_copy


class ThreadSafeInMemoryChannelLayer(DirectDelivery, InMemoryChannelLayer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._receiver_loops: dict[str, asyncio.AbstractEventLoop] = {}
        self._receiving: dict[str, int] = {}  # receives in flight by channel (changed on its receiver's loop)
        self._direct = {}
        self._handed_clean_at = 0.0
        self._forgot_at = 0.0

    CLEAN_EVERY = 1.0  # seconds between expiry cleanings handed to the receivers' loop by other threads

    async def send(self, channel: str, message: dict) -> None:
        self.send_now(channel, message)

    def send_now(self, channel: str, message: dict) -> None:
        """`send` from any thread, with or without an event loop (a put handed to the receiver's loop)."""
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        loop = self._receiver_loops.get(channel)
        item = (time.time() + self.expiry, receivers_copy(message))
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if loop is not None and loop is not current and not loop.is_closed():
            loop.call_soon_threadsafe(self._put_or_drop, channel, item)
            return
        self._put(channel, item)

    def _put_or_drop(self, channel: str, item: tuple) -> None:
        """A put handed to the receiver's loop: a full channel drops it, as a group send does."""
        try:
            self._put(channel, item)
        except ChannelFull:
            pass

    async def group_send(self, group: str, message: dict) -> None:
        self.group_send_now(group, message)

    def group_send_now(self, group: str, message: dict) -> None:
        """`group_send` from any thread, with or without an event loop: sync code (a view, a
        worker's task after commit) publishes without starting an event loop on a new thread
        (asgiref's `async_to_sync` from a thread with none) or hopping to the server's loop."""
        assert isinstance(message, dict), "Message is not a dict"
        self.require_valid_group_name(group)
        self._clean_expired_on_the_loop()
        for channel in list(self.groups.get(group, ())):  # a copy: the server's loop adds and discards
            try:
                self.send_now(channel, message)
            except ChannelFull:
                pass

    def _clean_expired_on_the_loop(self) -> None:
        """Expired messages and memberships are dropped on the loop the consumers receive on
        (asyncio queues are not thread-safe): here when this is it (or there is none), else
        handed to it, at most every CLEAN_EVERY seconds (its receives clean too)."""
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        # A set of the few loops first (many channels share them), then each asked once whether closed.
        loops = {loop for loop in set(self._receiver_loops.values()) if not loop.is_closed()}
        if not loops or current in loops:
            self._clean_expired()
            return
        now = time.monotonic()
        if now - self._handed_clean_at < self.CLEAN_EVERY:
            return
        self._handed_clean_at = now
        try:
            next(iter(loops)).call_soon_threadsafe(self._clean_expired)
        except RuntimeError:  # closed meanwhile: the next send hands it to another
            self._handed_clean_at = 0.0

    def groups_watched_now(self, groups: list[str]) -> set[str]:
        """Of these groups, those with members now (from any thread)."""
        return {g for g in groups if self.groups.get(g)}

    def _put(self, channel: str, item: tuple) -> None:
        if self._direct and self._taken(channel, item[1], self.channels.get(channel)):
            return
        queue = self.channels.get(channel)
        if queue is None:  # not a new asyncio.Queue per put only to throw it away (setdefault's argument)
            queue = self.channels.setdefault(channel, asyncio.Queue(maxsize=self.get_capacity(channel)))
        try:
            queue.put_nowait(item)
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None

    async def receive(self, channel: str) -> dict:
        # Kept after the receive: a consumer receives on one channel from one loop for its lifetime
        # (until `_forget_finished` sees the channel finished).
        self._receiving[channel] = self._receiving.get(channel, 0) + 1
        self._receiver_loops[channel] = asyncio.get_running_loop()
        try:
            return await super().receive(channel)
        finally:
            left = self._receiving.pop(channel, 1) - 1
            if left:
                self._receiving[channel] = left

    def _clean_expired(self) -> None:
        super()._clean_expired()
        self._forget_finished()

    def _forget_finished(self) -> None:
        """Drop the receiver loop of each channel of this loop that is finished: no receive in flight,
        nothing queued, in no group (a `/run`'s follower after its last receive, a closed socket).
        Every `/run` makes a channel: kept forever, they were a leak, and every publish from a worker
        thread walked them all (`_clean_expired_on_the_loop`). Only this loop's channels: their
        receives start and end on it, so none starts while this looks."""
        now = time.monotonic()
        if now - self._forgot_at < self.CLEAN_EVERY:  # not on every receive (channels' cleaning is)
            return
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._forgot_at = now
        grouped: set[str] | None = None
        for channel, loop in list(self._receiver_loops.items()):
            if loop is not current or channel in self._receiving or channel in self.channels:
                continue
            if grouped is None:
                grouped = {name for members in list(self.groups.values()) for name in list(members)}
            if channel not in grouped:
                self._receiver_loops.pop(channel, None)
