"""The base of adkweb's websocket consumers, and joining and leaving their groups.

Publishing (what the consumers receive) is adkweb.live; this is the receiving end: a consumer that
forwards a fragment rendered once per audience without a thread hop or a task per message.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from channels.consumer import get_handler_name
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncWebsocketConsumer
from channels.layers import get_channel_layer
from channels.utils import await_many_dispatch

from adkweb import wsframes

logger = logging.getLogger(__name__)


class LiveConsumer(AsyncWebsocketConsumer):
    """The base of adkweb's websocket consumers.

    No thread hop per message. Channels (4.2+) hops to the one thread Django's sync code shares
    (asgiref's thread-sensitive executor) before every message it dispatches, to close stale
    database connections: with 1,000 sockets on a conversation, that was 1,000 hops per published
    fragment, queued on the thread the page's POST (and every view) needs, most of a web process's
    time (bench/README.md). Here a message goes straight to its handler: a handler that forwards a
    fragment touches no database, and one that reads goes through `database_sync_to_async`, which
    closes stale connections itself, before and after, on the thread that uses them. So: no ORM
    calls outside `database_sync_to_async` in these consumers.

    No task per message. Under daphne (a socket that takes frames written at once, adkweb.wsframes)
    and with a channel layer that offers it (adkweb.channel_layers), the channel's messages are
    handed to `frames_now` as the layer's reader receives them, when nothing of this consumer's is
    queued or being handled: a consumer that can answer without awaiting anything (a fragment
    rendered once per audience, forwarded) writes its frames in that call. Channels' dispatch loop
    (two tasks and an `asyncio.wait` per message, then the handler) was most of what a web process
    spent per socket per message once the frames were shared. What `frames_now` declines (None:
    it needs the database, or a frame must go through ASGI) is queued and goes through the
    consumer's async handler as before, and everything after it waits behind it: one order."""

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        """Channels' AsyncConsumer.__call__, with each message counted from the moment it is received
        until it is handled (`_handling`), and the channel's messages offered to `_take` first where
        the socket and the layer allow it."""
        self.scope = scope
        self._handling = 0
        self._failed: BaseException | None = None
        self.base_send = send
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        if self.channel_layer is None:
            sources = [self._counted(receive)]
            direct = False
        else:
            self.channel_name = await self.channel_layer.new_channel()
            self.channel_receive = self._counted(functools.partial(self.channel_layer.receive, self.channel_name))
            sources = [self._counted(receive), self.channel_receive]
            direct = scope.get(wsframes.SCOPE_KEY) is not None and hasattr(self.channel_layer, "deliver_directly")
        if direct:
            self.channel_layer.deliver_directly(self.channel_name, self._take)
        try:
            await await_many_dispatch(sources, self.dispatch)
        except StopConsumer:
            pass
        finally:
            if direct:
                self.channel_layer.stop_delivering_directly(self.channel_name)

    def _counted(self, receive: Callable[[], Awaitable[dict]]) -> Callable[[], Awaitable[dict]]:
        async def counted() -> dict:
            message = await receive()
            self._handling += 1  # in the step that took it from its queue: nothing overtakes it
            return message

        return counted

    async def dispatch(self, message: dict) -> None:
        try:
            if self._failed is not None:
                raise self._failed  # `frames_now` failed: the consumer ends as a failed handler ends it
            handler = getattr(self, get_handler_name(message), None)
            if handler is None:
                raise ValueError(f"No handler for message type {message['type']}")
            await handler(message)
        finally:
            if self._handling > 0:
                self._handling -= 1

    def _take(self, message: dict) -> bool:
        """The channel layer's direct delivery: True if the message was handled here and now."""
        if self._handling or self._failed is not None:
            return False  # something before it is queued or being handled
        writer = self.scope.get(wsframes.SCOPE_KEY)
        if writer is None or not writer.ready():
            return False  # not open yet, or closing: through ASGI
        try:
            frames = self.frames_now(message)
        except Exception as exc:
            self._failed = exc
            return False
        if frames is None:
            return False
        if frames:
            writer.write(*frames)
        return True

    def frames_now(self, message: dict) -> list[str] | None:
        """The frames a channel message makes when it can be handled without awaiting anything (the
        consumer's state updated as its handler would), or None, having changed nothing: the message
        then goes to its async handler, in order. Subclasses that forward fragments override this."""
        return None

    async def send_frame(self, text: str) -> None:
        """Send a text frame: under daphne, framed once per process for every socket that sends the
        same text (adkweb.wsframes); elsewhere through ASGI."""
        writer = self.scope.get(wsframes.SCOPE_KEY)
        if writer is None or not writer.write(text):
            await self.send(text_data=text)


LAYER_DOWN = 1011  # websocket close code "server error": clients (htmx's ws extension) reconnect later


async def join(consumer: Any, group: str) -> bool:
    """Join a group and accept the socket. If the channel layer is down, accept and close with
    1011 (try again later) instead of failing the handshake with a 500; False then."""
    try:
        await consumer.channel_layer.group_add(group, consumer.channel_name)
    except Exception:
        logger.warning("Could not join %s: the channel layer is down; the socket is closed, to retry.", group)
        await consumer.accept()
        await consumer.close(code=LAYER_DOWN)
        return False
    await consumer.accept()
    return True


async def leave(consumer: Any, group: str) -> None:
    try:
        await consumer.channel_layer.group_discard(group, consumer.channel_name)
    except Exception:  # the layer is down: its group memberships expire on their own
        logger.warning("Could not leave %s: the channel layer is down.", group)
