"""Channel layers: an in-memory one that is safe to send to from other threads (embedded mode), and
channels_redis's with a cheaper receive for a process's websocket consumers (services mode).

Embedded mode runs the Celery worker as threads of the serving process, each with its own event
loop. Channels' InMemoryChannelLayer puts into an asyncio.Queue from whatever loop sends, which
does not wake a consumer waiting on the server's loop. This layer hands the put to the loop the
receiver waits on.
"""

from __future__ import annotations

import asyncio
import time
from copy import deepcopy
from typing import Any

import channels_redis.core
from channels.exceptions import ChannelFull
from channels.layers import InMemoryChannelLayer


class ThreadSafeInMemoryChannelLayer(InMemoryChannelLayer):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._receiver_loops: dict[str, asyncio.AbstractEventLoop] = {}

    async def send(self, channel: str, message: dict) -> None:
        assert isinstance(message, dict), "message is not a dict"
        self.require_valid_channel_name(channel)
        loop = self._receiver_loops.get(channel)
        item = (time.time() + self.expiry, deepcopy(message))
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        if loop is not None and loop is not current and not loop.is_closed():
            loop.call_soon_threadsafe(self._put, channel, item)
            return
        self._put(channel, item)

    def _put(self, channel: str, item: tuple) -> None:
        queue = self.channels.setdefault(channel, asyncio.Queue(maxsize=self.get_capacity(channel)))
        try:
            queue.put_nowait(item)
        except asyncio.QueueFull:
            raise ChannelFull(channel) from None

    async def receive(self, channel: str) -> dict:
        # Kept after the receive: a consumer receives on one channel from one loop for its lifetime.
        self._receiver_loops[channel] = asyncio.get_running_loop()
        return await super().receive(channel)


class _Failed:
    """Put in a waiting consumer's queue when the reader failed (Redis down): its receive raises."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class RedisChannelLayer(channels_redis.core.RedisChannelLayer):
    """channels_redis's layer with a cheaper receive for process-local channels (every websocket
    consumer's). There, each waiting consumer raced the others for a receive lock on every message
    the process got: two new tasks, a wait and a cancellation per consumer per message, and a new
    queue each time, about a third of a web process's time with 1,000 sockets on one conversation
    (bench/README.md). Here one reader task per process pops the process's messages from Redis (the
    same `receive_single`: backup queue, cleaners) and puts each into the queue of every channel it is
    for, in the order popped; a consumer's receive waits on its own queue only. The reader runs while
    someone waits; a failure (Redis down) is raised in every waiting receive, as channels_redis does
    in turn, and the next receive starts a new reader."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._queues: dict[str, asyncio.Queue] = {}
        self._waiting: set[str] = set()
        self._reader: asyncio.Task | None = None

    async def receive(self, channel: str) -> dict:
        if "!" not in channel:
            return await super().receive(channel)
        assert self.require_valid_channel_name(channel)
        queue = self._queue(channel)
        if queue.empty():
            self._waiting.add(channel)
            try:
                self._start_reader(self.non_local_name(channel))
                item = await queue.get()
            except asyncio.CancelledError:
                self._waiting.discard(channel)
                self._queues.pop(channel, None)  # its consumer is gone
                if not self._waiting and self._reader is not None:
                    self._reader.cancel()  # nobody receives: stop popping (nothing is lost: backup queue)
                    self._reader = None  # the next receive starts a new one
                raise
            self._waiting.discard(channel)
        else:
            item = queue.get_nowait()
        if isinstance(item, _Failed):
            raise item.exc
        return item

    def _queue(self, channel: str) -> asyncio.Queue:
        queue = self._queues.get(channel)
        if queue is None:
            queue = self._queues[channel] = channels_redis.core.BoundedQueue(self.capacity)
        return queue

    def _start_reader(self, real_channel: str) -> None:
        loop = asyncio.get_running_loop()
        reader = self._reader
        if reader is None or reader.done() or reader.get_loop() is not loop:
            self._reader = loop.create_task(self._read(real_channel))

    async def _brpop_with_clean(self, index: int, channel: str, timeout: float) -> Any:
        """channels_redis's pop, which `receive_single` repeats until a message comes: not once more
        for a task asked to stop. A reader cancelled as its loop ended (a request's, under Django's
        test client and `async_to_sync`) was seen to go on popping, its cancellation lost below,
        so `asyncio.run` waited for it for ever (the integration suite hung there)."""
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise asyncio.CancelledError
        return await super()._brpop_with_clean(index, channel, timeout)

    async def _read(self, real_channel: str) -> None:
        try:
            while self._waiting:
                to, message = await self.receive_single(real_channel)
                for channel in to if isinstance(to, list) else [to]:
                    self._queue(channel).put_nowait(message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - handed to the consumers waiting, as channels_redis does
            for channel in list(self._waiting):
                self._queue(channel).put_nowait(_Failed(exc))
