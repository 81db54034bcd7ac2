"""redis-py's asyncio connections with a command write that does not lose a cancellation (split out of
adkweb.channel_layers.redis_layer, whose layer makes its pools' connections with `cancel_safe`)."""

from __future__ import annotations

import asyncio
from typing import Any


class _CancelSafeSend:
    """redis-py's asyncio connection, whose command write does not lose a cancellation.

    With a `socket_timeout` (ours is 30 s, settings.CHANNEL_LAYERS) redis-py writes a command
    through `asyncio.wait_for`, and Python 3.11's `wait_for` returns the write's result when the
    cancel of its caller lands after the write finished but before the caller resumed (fixed in
    3.12, where wait_for is built on asyncio.timeout): the task goes on as if never cancelled. The
    layer's reader sends a pop as soon as the previous one returns, so `asyncio.run`'s cancel at the
    end of a request's loop (Django's test client, `async_to_sync`) often landed there, and the
    reader popped for ever while the loop waited for it. Here a cancel asked during the write and
    not delivered is delivered once it is done; the connection is closed first, as redis-py does
    for a write cut short (the command's reply will never be read)."""

    async def send_packed_command(self, *args: Any, **kwargs: Any) -> None:
        task = asyncio.current_task()
        asked = task.cancelling() if task is not None else 0
        await super().send_packed_command(*args, **kwargs)  # type: ignore[misc]
        if task is not None and task.cancelling() > asked:
            await self.disconnect(nowait=True)  # type: ignore[attr-defined]
            raise asyncio.CancelledError


_cancel_safe_classes: dict[type, type] = {}


def cancel_safe(connection_class: type) -> type:
    """`connection_class` (redis-py's, SSL's, a Sentinel's) with `_CancelSafeSend`'s write."""
    if issubclass(connection_class, _CancelSafeSend):
        return connection_class
    made = _cancel_safe_classes.get(connection_class)
    if made is None:
        made = type(f"CancelSafe{connection_class.__name__}", (_CancelSafeSend, connection_class), {})
        _cancel_safe_classes[connection_class] = made
    return made
