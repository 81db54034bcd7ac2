"""The base of adkweb's websocket consumers, and joining and leaving their groups.

Publishing (what the consumers receive) is adkweb.live; this is the receiving end: a consumer that
forwards a fragment rendered once per audience without a thread hop or a task per message.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from channels.consumer import get_handler_name
from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.layers import get_channel_layer
from channels.utils import await_many_dispatch

from adkweb import live_logins, live_rights, live_socket_login, wsframes

logger = logging.getLogger(__name__)


class LiveConsumer(live_socket_login.LoginBound):
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
    consumer's async handler as before, and everything after it waits behind it: one order.

    Rights: what `rights(person)` answers when the socket connects (`granted`) is asked again on a
    timer while it is open (adkweb.live_rights): none left, the socket closes with `refused`; another
    answer, with RIGHTS_CHANGED (the page reconnects under the new rights); after either, nothing more
    is forwarded. Not waiting for the timer: a login that ends closes its sockets (adkweb.live_logins),
    a change of roles has them asked again (adkweb.live_roles), at once; a session closes its sockets
    when it expires (adkweb.live_socket_login)."""

    refused: ClassVar[int] = 4403  # the consumer's refusal code (not one the htmx ws extension reconnects on)
    user: Any = None  # the person, as read at connect or at the last re-check
    granted: Any = True
    revoked = False
    _recheck_timer: asyncio.TimerHandle | None = None
    _recheck_task: asyncio.Future | None = None

    def rights(self, user: Any) -> Any:
        """What this person may see on this socket, as a comparable value; None: nothing (sync: it may
        read the database). Asked when the socket connects and on the re-check timer."""
        return True

    def rights_key(self) -> tuple:
        """What `rights` depends on besides the person (the conversation, the ticket)."""
        return ()

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
            for pending in (self._recheck_timer, self._recheck_task, self._expiry_timer, self._expiry_task):
                if pending is not None:
                    pending.cancel()

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
            if self.revoked and not message["type"].startswith("websocket."):
                return  # closed for lost rights: nothing more is forwarded
            handler = getattr(self, get_handler_name(message), None)
            if handler is None:
                raise ValueError(f"No handler for message type {message['type']}")
            await handler(message)
        finally:
            if self._handling > 0:
                self._handling -= 1

    def _take(self, message: dict) -> bool:
        """The channel layer's direct delivery: True if the message was handled here and now."""
        if self.revoked:
            return True  # closed for lost rights: dropped
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
        if self.revoked:
            return
        writer = self.scope.get(wsframes.SCOPE_KEY)
        if writer is None or not writer.write(text):
            await self.send(text_data=text)

    async def send(self, text_data: str | None = None, bytes_data: bytes | None = None, close: bool = False) -> None:
        if not self.revoked:  # a handler that was reading when the rights went sends nothing
            await super().send(text_data=text_data, bytes_data=bytes_data, close=close)

    async def _read(self, read: Callable, *args: Any) -> Any:
        """`read(*args)` on the database's thread; None if it failed (the database is down): the socket is
        then closed with LAYER_DOWN, and the page retries."""
        try:
            return await database_sync_to_async(read)(*args)
        except Exception:
            logger.warning("Could not re-check the rights of a websocket's person; it is closed, to retry.")
            await self._revoke(LAYER_DOWN)
            return None

    async def close(self, code: int | bool | None = None, reason: str | None = None) -> None:
        """Under daphne, 1011 and 1012 directly (adkweb.wsframes.FrameWriter.close: autobahn refuses them)."""
        writer = self.scope.get(wsframes.SCOPE_KEY)
        if code not in (LAYER_DOWN, live_rights.RIGHTS_CHANGED) or writer is None or not writer.close(code):
            await super().close(code=code, reason=reason)

    def _recheck_later(self) -> None:
        if self._recheck_timer is not None:
            self._recheck_timer.cancel()  # a check made now (adkweb.live_roles) starts the interval again
        delay = live_rights.next_check()
        if delay is not None:
            self._recheck_timer = asyncio.get_running_loop().call_later(delay, self._recheck_due)

    def _recheck_due(self) -> None:
        self._recheck_timer = None
        self._recheck_task = asyncio.ensure_future(self._recheck())

    async def _recheck(self, since: float | None = None) -> None:
        """The person's rights again (adkweb.live_rights): the same, go on with the person as read now;
        else close. A check that fails (the database is down) closes with LAYER_DOWN: the page retries."""
        key = (type(self).__qualname__, *self.rights_key())
        found = await self._read(live_rights.rights_now, self.scope, key, self.rights, since)
        if found is None:
            return
        person, rights = found
        if rights is None:
            await self._revoke(self.refused)
        elif rights != self.granted:
            await self._revoke(live_rights.RIGHTS_CHANGED)
        else:
            self.user = person
            self._recheck_later()

    async def websocket_disconnect(self, message: dict) -> None:
        if self._logins is not None:
            await leave(self, self._logins)
        await super().websocket_disconnect(message)

    async def _revoke(self, code: int) -> None:
        if self.revoked:
            return  # closed already (a re-check and a logout both ended it)
        self.revoked = True
        for group in getattr(self, "_joined", ()):
            await leave(self, group)
        await self.close(code=code)


LAYER_DOWN = 1011  # websocket close code "server error": clients (htmx's ws extension) reconnect later


async def join(consumer: Any, group: str, joined: Callable[[], Awaitable[Any]] | None = None) -> bool:
    """Join a group, and the group of the socket's person's logins (adkweb.live_logins) with it, and
    accept the socket. If the channel layer is down, accept and close with 1011 (try again later)
    instead of failing the handshake with a 500; False then. `joined`: awaited once in the groups, before
    the socket is accepted (a read of what the page shows: a change published meanwhile is heard)."""
    logins, consumer.login = live_logins.of_socket(consumer.scope)
    groups = [group]
    if logins is not None and consumer._logins is None:
        consumer._logins = logins  # left when the socket disconnects, whether the join below fails or not
        groups.append(logins)
    try:
        await asyncio.gather(*(consumer.channel_layer.group_add(g, consumer.channel_name) for g in groups))
    except Exception:
        logger.warning("Could not join %s: the channel layer is down; the socket is closed, to retry.", group)
        await consumer.accept()
        await consumer.close(code=LAYER_DOWN)
        return False
    if joined is not None:
        await joined()
    await consumer.accept()
    consumer._joined = [*getattr(consumer, "_joined", ()), *groups]
    consumer._recheck_later()
    consumer._expiry_later()
    return True


async def leave(consumer: Any, group: str) -> None:
    try:
        await consumer.channel_layer.group_discard(group, consumer.channel_name)
    except Exception:  # the layer is down: its group memberships expire on their own
        logger.warning("Could not leave %s: the channel layer is down.", group)
