"""A socket's one timer for the nearest due time it shows (the ticket page's, the inbox's): at that time a
message on the socket's own channel, whose handler then runs in order with the socket's other messages
(one render at a time). Armed again as what the page shows changes; cancelled when the socket closes."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import ClassVar

from adkweb import live_socket

logger = logging.getLogger(__name__)
DUE_MARGIN = 0.05  # seconds after a due time its push is made (a timer may fire a little early)


class DueWatching(live_socket.LiveConsumer):
    due_message: ClassVar[str]  # the message's type (its handler: the consumer's)
    _due_timer: asyncio.TimerHandle | None = None
    _due_task: asyncio.Future | None = None

    def arm_due(self, at: float | None) -> None:
        """The timer for `at` (a time.time() instant; past: at once), in place of the one set; None: none."""
        if self._due_timer is not None:
            self._due_timer.cancel()
            self._due_timer = None
        if at is not None:
            delay = max(at - time.time(), 0) + DUE_MARGIN
            self._due_timer = asyncio.get_running_loop().call_later(delay, self._due_reached)

    def _due_reached(self) -> None:
        self._due_timer = None
        self._due_task = asyncio.ensure_future(self._send_due())

    async def _send_due(self) -> None:
        try:
            await self.channel_layer.send(self.channel_name, {"type": self.due_message})
        except Exception:  # the layer is down: the socket is closed with it, and the page reconnects
            logger.warning("Could not push a due time to its page (%s).", self.due_message, exc_info=True)
