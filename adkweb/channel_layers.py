"""An in-memory channel layer that is safe to send to from other threads.

Embedded mode runs the Celery worker as threads of the serving process, each with its own event
loop. Channels' InMemoryChannelLayer puts into an asyncio.Queue from whatever loop sends, which
does not wake a consumer waiting on the server's loop. This layer hands the put to the loop the
receiver waits on.
"""

from __future__ import annotations

import asyncio
import time
from copy import deepcopy

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
